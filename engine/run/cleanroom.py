"""The clean room: the verifier runs in a fresh container, and only the task's artifacts cross into it.

Why: the verifier used to run in the container the policy had just controlled as root. A guard that lists
known places cannot converge (a new ``pytest.py`` in the standard library's directory, a
``python311.zip``, a FIFO where the terminfo entry belongs, ``/dev/fd`` made a directory...: each one gave
reward 1 or an excused infra error). So after the agent phase the end state is captured from the host
(engine/run/endstate.py), a fresh container of the task's image is started, and only the *artifacts* are
carried into it: the changes under the task's working directory, Harbor's ``/logs/artifacts`` and the paths
the task declares (engine/tasks/artifacts.py). Everything else the policy changed never reaches the
verifier: it stays evidence (the changes view, the guard's findings, the diagnosis).

What crosses, per change under an artifact root:

* regular files (with their mode, owner and content; set-uid/gid bits cleared), directories, and
  symlinks whose target stays inside the same root (resolved lexically from the link's directory);
* deletions (the image's files the policy removed under the root);
* dropped, each recorded as a finding: FIFOs, sockets, device nodes, links leaving their root, a link
  standing in for the root itself, a file whose content is not available (over the capture cap and the
  agent's container gone: regrade), and a file over what the clean room carries in all
  (:data:`CARRY_BYTES`: a ``truncate -s 200G`` artifact is never streamed).

Hard links to one file (``Change.same_as``) cross as hard links: the content is read and carried once.

A working directory the policy deleted or replaced with a non-directory cannot be verified at all
(``agent_error:workdir_replaced``). The fresh container has a fresh ``/dev`` (Docker's), the image's
``/tmp`` and an empty ``/logs``; ``tests/`` is copied in after the artifacts, as in place.

Regrade (engine/run/regrade.py) carries from the stored end state with the same :func:`plan`, so a regrade
verifies exactly what the episode's verifier saw.
"""

from __future__ import annotations

import base64
import contextlib
import json
import posixpath
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import docker

from ..sandbox.chunk_reader import ChunkReader
from ..tasks.artifacts import under
from .endstate import DELETED, Change
from .guard import Finding

#: The finding rule of an artifact that did not cross (never a guard rule: it is not about tampering).
DROPPED = "artifact_dropped"
#: Spooled in memory up to this, then on disk: the archive put into the fresh container.
_SPOOL_BYTES = 32 * 1024 * 1024
#: What the clean room's carry reads from the agent's container in all (artifacts over the capture cap):
#: an honest 200 MiB output crosses; a file past what is left of it is dropped, never streamed.
CARRY_BYTES = 2 << 30
_CHUNK = 1 << 16
_SPECIAL_NAMES = {
    "fifo": "a FIFO",
    "socket": "a socket",
    "char": "a character device",
    "block": "a block device",
}

#: Fetches an artifact's content the end state does not hold (over the capture cap), at most ``limit``
#: bytes: a readable file object and its size, or None (missing, not a regular file, or over the limit).
Fetch = Callable[[str, int], tuple[IO[bytes], int] | None]


@dataclass
class Carry:
    """What crosses into the clean room, what is deleted there, and what was dropped (with why)."""

    roots: list[str]
    workdir: str
    put: list[Change] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    dropped: list[Finding] = field(default_factory=list)
    workdir_replaced: str = ""  # why, when the workdir itself is gone or no longer a directory
    left_out: int = 0  # changes outside every artifact root: evidence only

    def as_dict(self) -> dict[str, Any]:
        return {
            "roots": self.roots,
            "carried": len(self.put),
            "deleted": len(self.deleted),
            "left_out": self.left_out,
            "dropped": [f.as_dict() for f in self.dropped],
            "workdir_replaced": self.workdir_replaced,
        }

    def drop_summary(self, limit: int = 3) -> str:
        shown = "; ".join(f"{f.path} ({f.why})" for f in self.dropped[:limit])
        more = f"; … {len(self.dropped) - limit} more" if len(self.dropped) > limit else ""
        return f"artifacts dropped: {shown}{more}" if self.dropped else ""


def _ancestors(path: str) -> list[str]:
    out, p = [], path
    while p not in ("/", ""):
        p = posixpath.dirname(p)
        out.append(p)
    return out


def _link_target(path: str, link: str) -> str:
    return posixpath.normpath(link if link.startswith("/") else posixpath.join(posixpath.dirname(path), link))


def plan(changes: Iterable[Change], roots: list[str], workdir: str) -> Carry:
    """Chooses, from an end state's changes, what the clean room gets (pure: unit-tested on its own)."""
    carry = Carry(roots=list(roots), workdir=workdir)
    changes = sorted(changes, key=lambda c: c.path)
    gone = {c.path for c in changes if c.kind == DELETED or (c.type and c.type != "dir")}
    for path in (workdir, *_ancestors(workdir)):
        c = next((x for x in changes if x.path == path), None)
        if c is None:
            continue
        with_it = "" if path == workdir else f" (and the workdir {workdir} with it)"
        if c.kind == DELETED:
            carry.workdir_replaced = f"{path} was deleted{with_it}"
            break
        if c.type and c.type != "dir":
            what = f"a {c.type}" if c.type != "other" else _SPECIAL_NAMES.get(c.special, "a special file")
            carry.workdir_replaced = f"{path} is now {what}, not a directory{with_it}"
            break
    for root in roots:  # a root under a deleted or replaced directory is gone with it
        if root != workdir and any(a in gone for a in _ancestors(root)) and root not in carry.deleted:
            carry.deleted.append(root)
    for c in changes:
        owner = next((r for r in roots if under(c.path, r)), None)
        if owner is None:
            carry.left_out += 1
            continue
        root = owner
        if root == workdir and carry.workdir_replaced:
            continue
        if c.kind == DELETED:
            carry.deleted.append(c.path)
            continue
        if c.type == "dir" or c.type == "file":
            carry.put.append(c)
        elif c.type == "symlink":
            target = _link_target(c.path, c.link)
            if c.path == root:
                carry.dropped.append(_dropped(c, f"a symlink standing in for the artifact {root}"))
            elif under(target, root):
                carry.put.append(c)
            else:
                carry.dropped.append(_dropped(c, f"a symlink to {c.link}, outside {root}"))
        else:
            what = _SPECIAL_NAMES.get(c.special, "a special file")
            carry.dropped.append(_dropped(c, what))
    return carry


def _dropped(c: Change, why: str) -> Finding:
    return Finding(DROPPED, c.path, c.kind, f"{why}: not carried into the clean room")


def _members(archive: Path | None) -> dict[str, tarfile.TarInfo]:
    if archive is None:
        return {}
    with contextlib.suppress(OSError, tarfile.TarError), tarfile.open(archive, "r") as tar:
        return {"/" + m.name.lstrip("/"): m for m in tar.getmembers()}
    return {}


def build(
    carry: Carry,
    archive: Path | None,
    fetch: Fetch | None = None,
    *,
    tests: Path | None = None,
    logs_dir: str = "",
    carry_bytes: int = CARRY_BYTES,
    extra: Callable[[tarfile.TarFile], None] | None = None,
) -> IO[bytes]:
    """The tar the fresh container gets (rewound); artifacts whose content cannot be had are moved from
    ``carry.put`` to ``carry.dropped``. ``tests`` (the task's ``tests/``, copied to ``/tests``) and an empty
    ``logs_dir`` ride in the same archive, and whatever ``extra`` adds (the verifier's kit,
    engine/run/observer.py): one round trip prepares the verifier (the clean room is ours, nothing to
    reset first). What is fetched from the agent's container is at most ``carry_bytes`` in all: a file
    past what is left is dropped (its size and allocated bytes named), never read."""
    out = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - returned to the caller
    members = _members(archive)
    kept: list[Change] = []
    carried: set[str] = set()  # regular files already in this archive: a hard link to one is a link
    left = carry_bytes
    with contextlib.ExitStack() as stack:
        src = stack.enter_context(tarfile.open(archive, "r")) if members and archive is not None else None
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for c in carry.put:
                info = tarfile.TarInfo(c.path.lstrip("/"))
                member = members.get(c.path)
                if member is not None:
                    info.uid, info.gid, info.mtime = member.uid, member.gid, member.mtime
                info.mode = (c.mode or (0o755 if c.type == "dir" else 0o644)) & 0o1777
                if member is not None and member.islnk():  # the capture's hard link: its target's content
                    member = members.get("/" + member.linkname.lstrip("/"))
                if c.type == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif c.type == "symlink":
                    info.type, info.linkname = tarfile.SYMTYPE, c.link
                    tar.addfile(info)
                elif c.same_as and c.same_as in carried:
                    info.type, info.linkname = tarfile.LNKTYPE, c.same_as.lstrip("/")
                    tar.addfile(info)
                elif member is not None and member.isreg() and src is not None:
                    info.size = member.size
                    tar.addfile(info, src.extractfile(member))
                else:
                    size = c.size or 0
                    if size > left:
                        carry.dropped.append(_dropped(c, _over_limit(c, carry_bytes)))
                        continue
                    got = fetch(c.path, left) if fetch is not None else None
                    if got is None:
                        carry.dropped.append(
                            _dropped(
                                c, "its content was not captured (over the capture cap) and cannot be read"
                            )
                        )
                        continue
                    fh, size = got
                    left -= size
                    with fh:
                        info.size = size
                        tar.addfile(info, fh)
                if c.type == "file":
                    carried.add(c.path)
                kept.append(c)
            if tests is not None:
                add_tree(tar, tests, "tests")
            if logs_dir:
                for part in _prefixes(logs_dir.strip("/")):
                    info = tarfile.TarInfo(part)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            if extra is not None:
                extra(tar)
    carry.put = kept
    out.seek(0)
    return out


def _over_limit(c: Change, carry_bytes: int) -> str:
    size = c.size or 0
    alloc = f", {_size(c.alloc)} allocated" if c.alloc is not None and c.alloc < size else ""
    return f"{_size(size)}{alloc}: over what the clean room carries from the agent's container " + (
        f"({_size(carry_bytes)} in all)"
    )


def _size(n: int) -> str:
    """Bytes as a person reads them (``200.0 GiB``), exact below a KiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def _prefixes(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def add_tree(tar: tarfile.TarFile, host_dir: Path, prefix: str) -> None:
    """A host directory's contents under ``prefix``, owned by root (as ``Sandbox.put_dir`` copies it)."""
    info = tarfile.TarInfo(prefix)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    tar.addfile(info)
    for src in sorted(host_dir.rglob("*")):
        info = tar.gettarinfo(str(src), arcname=f"{prefix}/{src.relative_to(host_dir).as_posix()}")
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        if info.isreg():
            with open(src, "rb") as fh:
                tar.addfile(info, fh)
        else:
            tar.addfile(info)


def fetcher(client: docker.DockerClient, container_id: str) -> Fetch:
    """Reads a regular file from a (paused or stopped) container through the engine's archive API: for
    artifacts over the capture cap, while the agent's container still exists. Nothing runs inside. A
    file over ``limit`` (by the engine's stat, before any content is sent) is not read at all."""
    api = client.api

    def fetch(path: str, limit: int) -> tuple[IO[bytes], int] | None:
        url = api._url("/containers/{0}/archive", container_id)  # type: ignore[attr-defined]  # private
        try:
            res = api._get(url, params={"path": path}, stream=True)  # type: ignore[attr-defined]  # as above
        except (docker.errors.APIError, OSError):
            return None
        try:
            if res.status_code != 200:
                return None
            st = json.loads(base64.b64decode(res.headers.get("X-Docker-Container-Path-Stat", "e30=")))
            if int(st.get("size", 0)) > limit:
                return None
            with tarfile.open(fileobj=ChunkReader(res.iter_content(_CHUNK)), mode="r|") as tar:
                for member in tar:
                    fh = tar.extractfile(member) if member.isreg() and member.size <= limit else None
                    if fh is None:
                        return None
                    buf = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - returned
                    while chunk := fh.read(_CHUNK):
                        buf.write(chunk)
                    buf.seek(0)
                    return buf, member.size
            return None
        except (OSError, ValueError, tarfile.TarError):
            return None
        finally:
            res.close()

    return fetch


def apply(sandbox: Any, carry: Carry, data: IO[bytes]) -> None:
    """Deletions first (the fresh container's own ``rm``: nothing of the policy's runs there), then the
    artifacts through the engine's archive API."""
    if carry.deleted:
        code, out = sandbox.exec(["/bin/rm", "-rf", "--", *carry.deleted], timeout=60)
        if code != 0:
            raise RuntimeError(f"could not carry deletions into the clean room: {out.strip()[:300]}")
    with data:
        if not sandbox.container.put_archive("/", data):
            raise RuntimeError("the engine refused the artifacts")


__all__ = ["CARRY_BYTES", "DROPPED", "Carry", "add_tree", "apply", "build", "fetcher", "plan"]
