"""End-state capture: what the policy left in its container, read after the agent and before the verifier.

The change list is the container's filesystem diff against its image (added / modified / deleted, in the
Docker engine's terms), each regular file with its size and sha256; the content of changed regular files
goes into ``recordings/episode-N/endstate.tar`` up to a cap per episode (``[endstate] cap_mb``, default
20 MB); bigger files are listed only. It is evidence for the curator, the tamper guard's input, and what
``bandpass regrade`` re-verifies.

Nothing inside the container is trusted to report it: the policy was root there and may have replaced
``find`` or ``tar``. Two readers, same answer:

- the **engine** reader asks the Docker API (``/containers/ID/changes`` and ``/archive``), which works with
  any daemon but costs a diff walk and one round trip per file;
- the **layer** reader walks the container's overlay2 upper directory on the host directly (whiteouts are
  deletions; a path present in a lower layer makes it "modified") when Bandpass runs beside the daemon
  with access to its storage: no daemon round trips, a few milliseconds per episode. Symlinks are never
  followed and only regular files are opened, so a hostile upper dir cannot point the reader elsewhere.

What a capture costs is bounded by :class:`Limits`, whatever the policy left, so the capture phase always
ends inside its timeout and a costly end state is the policy's outcome, never an infra error: a file is
read (hashed, archived) only up to its size when it was listed (a file still growing is cut there) and
only when it is at most ``Limits.file_bytes``; what all reads take together is bounded in bytes and in
seconds, and past that files are listed with their size and allocated bytes only (``Change.alloc``; a
``truncate -s 200G`` file costs one ``stat``); hard links to one file are read once (``Change.same_as``).
A listing that cannot finish within ``Limits.entries`` entries or ``Limits.walk_s`` seconds is cut short
(``EndState.truncated``): the episode then ends ``agent_error:endstate_too_large`` (engine/run/phases.py).
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import hashlib
import io
import json
import os
import stat
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import docker

from ...store import queries
from ...store.db import session
from ...store.queries import endstate as endstate_store
from ..core.workspace import Workspace
from ..sandbox.chunk_reader import ChunkReader
from ..sandbox.hostview import file_kind

DEFAULT_CAP_BYTES = 20 * 1024 * 1024
#: Archived files up to this size are also kept in memory for the guard's content rules...
_KEEP_IN_MEMORY = 256 * 1024
#: ...and files the guard reads whatever their size (a ``pytest11`` entry point padded past 256 KiB once
#: slipped through): every archived one is kept; one over the capture cap is flagged unread.
GUARD_READS = ("entry_points.txt", ".pth", "gitconfig", "/.git/config")
_CHUNK = 1 << 16

# Go's os.FileMode type bits, as the archive API's stat header reports them.
_GO_DIR, _GO_SYMLINK = 1 << 31, 1 << 27
_GO_TYPE = _GO_DIR | _GO_SYMLINK | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (1 << 19)

ADDED, MODIFIED, DELETED = "added", "modified", "deleted"


@dataclass(frozen=True)
class Limits:
    """What one capture may cost. The defaults keep a capture well inside the phase's 60 s on a loaded
    2-core machine; an honest end state (a 200 MiB output, 150,000 files, a pip install) stays far below
    every one of them."""

    #: A file bigger than this is listed (size, allocated bytes), never read: a sparse 200 GB file is a stat.
    file_bytes: int = 1 << 30
    #: What all the reads of one capture take together, in bytes and in seconds; past either, files are
    #: listed only.
    read_bytes: int = 4 << 30
    read_s: float = 20.0
    #: The listing itself: past this many entries or seconds it is cut short (``EndState.truncated``).
    entries: int = 300_000
    walk_s: float = 40.0


DEFAULT_LIMITS = Limits()
_KIND = {0: MODIFIED, 1: ADDED, 2: DELETED}


@dataclass
class Change:
    path: str
    kind: str  # added | modified | deleted
    type: str = ""  # file | dir | symlink | other ("" for deleted)
    size: int | None = None
    sha256: str = ""
    mode: int = 0
    link: str = ""
    archived: bool = False
    special: str = ""  # for type "other": fifo | socket | char | block
    #: Allocated bytes of a regular file (blocks x 512; below ``size`` for a sparse file); None: unknown.
    alloc: int | None = None
    #: The earlier path of the same file (a hard link): read, hashed and carried once.
    same_as: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class EndState:
    """One capture. ``exists_in_image(path)`` answers from the image's layers (or, failing that, the
    container), for the guard's shadowing rules."""

    changes: list[Change] = field(default_factory=list)
    archive: Path | None = None
    archived_bytes: int = 0
    cap_bytes: int = DEFAULT_CAP_BYTES
    over_cap: int = 0
    reader: str = ""  # layer | engine
    duration_s: float = 0.0
    contents: dict[str, bytes] = field(default_factory=dict, repr=False)
    exists_in_image: Callable[[str], bool] = field(default=lambda _p: False, repr=False)
    limits: Limits = field(default=DEFAULT_LIMITS, repr=False)
    read_bytes: int = 0  # what this capture read of the files' content
    unread: int = 0  # regular files listed with their size only (over a limit: not hashed, not archived)
    truncated: str = ""  # why the listing was cut short ('' when it is complete)
    _started: float = field(default_factory=time.monotonic, repr=False)
    _inodes: dict[tuple[int, int], Change] = field(default_factory=dict, repr=False)

    def change_dicts(self) -> list[dict[str, Any]]:
        return [c.as_dict() for c in self.changes]

    def figures(self) -> dict[str, Any]:
        """The capture's own cost and limits (stored with the carry: ``carry_json["capture"]``)."""
        return {
            "read_bytes": self.read_bytes,
            "unread": self.unread,
            "truncated": self.truncated,
            "entries": len(self.changes),
        }

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def listing_over(self) -> bool:
        """True (and ``truncated`` set) once the listing has used its entries or its seconds."""
        if not self.truncated:
            if len(self.changes) >= self.limits.entries:
                self.truncated = f"over {self.limits.entries} changed entries"
            elif self.elapsed() > self.limits.walk_s:
                n = len(self.changes)
                self.truncated = f"the listing ran past {self.limits.walk_s:g} s ({n} entries)"
        return bool(self.truncated)

    def may_read(self, size: int) -> bool:
        """Whether a file of ``size`` bytes is read (hashed, maybe archived) or only listed."""
        lim = self.limits
        return (
            size <= lim.file_bytes
            and self.read_bytes + size <= lim.read_bytes
            and self.elapsed() <= lim.read_s
        )


def capture(
    client: docker.DockerClient,
    container: Any,
    dest: Path,
    *,
    cap_bytes: int = DEFAULT_CAP_BYTES,
    reader: str = "auto",
    limits: Limits = DEFAULT_LIMITS,
) -> EndState:
    """Captures the container's changes into ``dest`` (a tar; not written when nothing is archived).

    ``reader``: ``auto`` (the layer reader when the upper directory is readable here, else the engine),
    ``layer`` or ``engine``. ``limits`` bound what it costs (:class:`Limits`).
    """
    started = time.monotonic()
    layers = _layers(client, container)
    use_layer = reader == "layer" or (reader == "auto" and layers is not None)
    if use_layer and layers is None:
        raise RuntimeError("the container's overlay2 layers are not readable from here")
    state = EndState(cap_bytes=cap_bytes, limits=limits)
    tmp = dest.with_name(dest.name + ".part")
    if use_layer and layers is not None:
        try:
            with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
                state.reader = "layer"
                _capture_layers(layers[0], layers[1], tar, state)
        except (RecursionError, OSError, ValueError):  # e.g. a policy's 5000-deep directory chain
            if reader == "layer":
                raise
            state = EndState(cap_bytes=cap_bytes, limits=limits)
            use_layer = False
    if not use_layer:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            state.reader = "engine"
            _capture_engine(client, container, tar, state)
    _drop_harness_paths(state)
    if state.archived_bytes or any(c.archived for c in state.changes):
        os.replace(tmp, dest)
        state.archive = dest
    else:
        tmp.unlink(missing_ok=True)
    state.duration_s = round(time.monotonic() - started, 4)
    return state


#: What the engine itself puts in the container's layer: the init binary's (read-only) mount point.
HARNESS_PATHS = frozenset({"/usr/sbin/docker-init", "/sbin/docker-init"})


def _drop_harness_paths(state: EndState) -> None:
    """Removes the engine's own mount points and the directories listed only because of them."""
    kept = [c for c in state.changes if c.path not in HARNESS_PATHS]
    if len(kept) == len(state.changes):
        return
    paths = [c.path for c in kept]

    def holds_change(d: str) -> bool:
        return any(p.startswith(d + "/") for p in paths)

    state.changes = [
        c for c in kept if not (c.type == "dir" and c.kind == MODIFIED and not holds_change(c.path))
    ]


# --------------------------------------------------------------------------------------- layer reader


def _layers(client: docker.DockerClient, container: Any) -> tuple[Path, list[Path]] | None:
    """(upper, lowers top first) when the daemon uses overlay2 and its directories are readable here."""
    attrs = (
        container.attrs if getattr(container, "attrs", None) else client.api.inspect_container(container.id)
    )
    gd = attrs.get("GraphDriver") or {}
    if gd.get("Name") != "overlay2":
        return None
    data = gd.get("Data") or {}
    upper, lower = data.get("UpperDir"), data.get("LowerDir") or ""
    if not upper:
        return None
    up = Path(upper)
    try:
        if not (up.is_dir() and os.access(up, os.R_OK | os.X_OK)):
            return None
    except OSError:
        return None
    return up, [Path(p) for p in lower.split(":") if p]


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _in_lowers(lowers: list[Path], rel: str) -> bool:
    """Whether the image has ``rel`` (a real path, no symlinked parents: overlay stores real paths)."""
    for lower in lowers:
        try:
            st = os.lstat(f"{lower}{rel}")
        except OSError:
            continue
        return not _is_whiteout(st)
    return False


def _capture_layers(upper: Path, lowers: list[Path], tar: tarfile.TarFile, state: EndState) -> None:
    state.exists_in_image = lambda p: _in_lowers(lowers, _real(lowers, p))

    def visit(rel_dir: str) -> None:
        try:
            entries = sorted(os.scandir(f"{upper}{rel_dir}"), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if state.listing_over():
                return
            rel = f"{rel_dir}/{entry.name}"
            if rel in HARNESS_PATHS:
                state.changes.append(Change(rel, ADDED))  # dropped with its parents afterwards
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if _is_whiteout(st):
                state.changes.append(Change(rel, DELETED))
                continue
            kind = MODIFIED if _in_lowers(lowers, rel) else ADDED
            if stat.S_ISDIR(st.st_mode):
                state.changes.append(Change(rel, kind, "dir", mode=stat.S_IMODE(st.st_mode)))
                before = len(state.changes)
                visit(rel)
                if kind == MODIFIED and _opaque(f"{upper}{rel}"):  # rm -rf DIR; mkdir DIR: the rest is gone
                    kept = {c.path for c in state.changes[before:]}
                    for gone in _lower_children(lowers, rel):
                        if gone not in kept:
                            state.changes.append(Change(gone, DELETED))
                if kind == ADDED and len(state.changes) == before:  # an empty new directory: keep it
                    info = tarfile.TarInfo(rel.lstrip("/"))
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, stat.S_IMODE(st.st_mode), st.st_mtime
                    info.uid, info.gid = st.st_uid, st.st_gid
                    tar.addfile(info)
                    state.changes[before - 1].archived = True
                continue
            change = Change(rel, kind, mode=stat.S_IMODE(st.st_mode))
            state.changes.append(change)
            info = tarfile.TarInfo(rel.lstrip("/"))
            info.mode, info.mtime, info.uid, info.gid = (
                stat.S_IMODE(st.st_mode),
                st.st_mtime,
                st.st_uid,
                st.st_gid,
            )
            if stat.S_ISLNK(st.st_mode):
                change.type, change.link = "symlink", os.readlink(f"{upper}{rel}")
                info.type, info.linkname = tarfile.SYMTYPE, change.link
                tar.addfile(info)
                change.archived = True
            elif stat.S_ISREG(st.st_mode):
                change.type, change.size, change.alloc = "file", st.st_size, st.st_blocks * 512
                if _same_file(state, change, (st.st_dev, st.st_ino), info, tar):
                    continue
                if not state.may_read(st.st_size):
                    state.unread += 1
                    continue
                _archive_regular(
                    change, info, _open_nofollow(f"{upper}{rel}", st.st_size), tar, state, limit=st.st_size
                )
            else:
                change.type = "other"
                change.special = _special(st.st_mode)

    visit("")


def _special(mode: int) -> str:
    kind = file_kind(mode)
    return kind if kind in ("fifo", "socket", "char", "block") else "unknown"


def _go_special(mode: int) -> str:
    """The special-file kind from Go's os.FileMode bits (the engine's archive stat header)."""
    if mode & (1 << 25):
        return "fifo"
    if mode & (1 << 24):
        return "socket"
    if mode & (1 << 26):
        return "char" if mode & (1 << 21) else "block"
    return "unknown"


def _opaque(path: str) -> bool:
    try:
        return os.getxattr(path, "trusted.overlay.opaque", follow_symlinks=False) == b"y"
    except OSError:
        return False


def _lower_children(lowers: list[Path], rel: str) -> list[str]:
    """The image's entries directly inside ``rel`` (what an opaque upper directory hides)."""
    names: set[str] = set()
    for lower in reversed(lowers):  # bottom first, so upper layers' whiteouts win
        with contextlib.suppress(OSError), os.scandir(f"{lower}{rel}") as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                (names.discard if _is_whiteout(st) else names.add)(e.name)
        if _opaque(f"{lower}{rel}"):
            break
    return sorted(f"{rel}/{n}" for n in names)


def _real(lowers: list[Path], path: str) -> str:
    """``/bin/tr`` -> ``/usr/bin/tr`` on a merged-/usr image: resolves symlinked *parents* in the image's
    layers (never the last component), the way the kernel would inside the container."""
    parts = [p for p in path.split("/") if p]
    out: list[str] = []
    for i, part in enumerate(parts):
        cur = "/" + "/".join([*out, part])
        if i < len(parts) - 1:
            for lower in lowers:
                try:
                    st = os.lstat(f"{lower}{cur}")
                except OSError:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(f"{lower}{cur}")
                    if not target.startswith("/"):
                        target = "/" + "/".join([*out, target])
                    out = [p for p in os.path.normpath(target).split("/") if p]
                    break
                out.append(part)
                break
            else:
                out.append(part)
        else:
            out.append(part)
    return "/" + "/".join(out)


def _open_nofollow(path: str, limit: int) -> Iterator[bytes]:
    """The file's first ``limit`` bytes (its size when it was listed: a file still growing is cut there)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        left = limit
        while left > 0 and (chunk := fh.read(min(_CHUNK, left))):
            left -= len(chunk)
            yield chunk


def _same_file(
    state: EndState, change: Change, key: tuple[int, int], info: tarfile.TarInfo, tar: tarfile.TarFile
) -> bool:
    """A hard link to a file listed before: it takes that file's hash and size, and (when that one was
    archived) a hard-link entry in the archive; never read again. False for a file seen the first time."""
    first = state._inodes.get(key)
    if first is None:
        state._inodes[key] = change
        return False
    change.same_as, change.sha256, change.size = first.path, first.sha256, first.size
    if first.archived:
        info.type, info.linkname = tarfile.LNKTYPE, first.path.lstrip("/")
        tar.addfile(info)
        change.archived = True
        if first.path in state.contents:
            state.contents[change.path] = state.contents[first.path]
    return True


# -------------------------------------------------------------------------------------- engine reader


def _capture_engine(
    client: docker.DockerClient, container: Any, tar: tarfile.TarFile, state: EndState
) -> None:
    api = client.api
    cid = container.id
    diff = api.diff(cid) or []
    paths = sorted({d["Path"] for d in diff})
    parents = {p.rsplit("/", 1)[0] or "/" for p in paths}
    state.exists_in_image = lambda p: _stat(api, cid, p) is not None
    for d in sorted(diff, key=lambda d: d["Path"]):
        if state.listing_over():
            return
        path, kind = d["Path"], _KIND.get(d["Kind"], MODIFIED)
        if path in HARNESS_PATHS:
            state.changes.append(Change(path, ADDED))  # dropped with its parents afterwards
            continue
        if kind == DELETED:
            state.changes.append(Change(path, DELETED))
            continue
        if path in parents:  # a directory holding other changes: no need to ask
            state.changes.append(Change(path, kind, "dir"))
            continue
        url = api._url("/containers/{0}/archive", cid)  # type: ignore[attr-defined]  # docker-py private
        res = api._get(url, params={"path": path}, stream=True)  # type: ignore[attr-defined]  # as above
        try:
            if res.status_code == 404:
                continue
            api._raise_for_status(res)  # type: ignore[attr-defined]  # docker-py private, as above
            st = json.loads(base64.b64decode(res.headers.get("X-Docker-Container-Path-Stat", "e30=")))
            mode = int(st.get("mode", 0))
            change = Change(path, kind, mode=mode & 0o7777)
            state.changes.append(change)
            if mode & _GO_DIR:
                change.type = "dir"
                continue
            if mode & _GO_SYMLINK:
                change.type, change.link = "symlink", st.get("linkTarget", "")
            elif mode & _GO_TYPE:
                change.type, change.special = "other", _go_special(mode)
                continue
            else:
                change.type, change.size = "file", int(st.get("size", 0))
                if not state.may_read(change.size):  # listed only: the rest of the stream is never read
                    state.unread += 1
                    continue
            with tarfile.open(fileobj=ChunkReader(res.iter_content(_CHUNK)), mode="r|") as src:
                for member in src:
                    info = member
                    info.name = path.lstrip("/")
                    if member.issym():
                        change.link = member.linkname  # as written (the stat header resolves it)
                        tar.addfile(info)
                        change.archived = True
                    elif member.isreg():
                        size = change.size or 0
                        _archive_regular(change, info, _member_chunks(src, member), tar, state, limit=size)
                    break
        finally:
            res.close()


def path_stat(client: docker.DockerClient, container_id: str, path: str) -> dict[str, Any] | None:
    """The engine's stat of a path in a container (created, running, paused or stopped), or None."""
    return _stat(client.api, container_id, path)


def _stat(api: Any, cid: str, path: str) -> dict[str, Any] | None:
    res = api.head(api._url("/containers/{0}/archive", cid), params={"path": path})
    if res.status_code != 200:
        return None
    header = res.headers.get("X-Docker-Container-Path-Stat", "e30=")  # base64 of "{}" when absent
    stat: dict[str, Any] = json.loads(base64.b64decode(header))
    return stat


def _member_chunks(src: tarfile.TarFile, member: tarfile.TarInfo) -> Iterator[bytes]:
    fh = src.extractfile(member)
    if fh is None:
        return
    while chunk := fh.read(_CHUNK):
        yield chunk


# ------------------------------------------------------------------------------------------- shared


def _archive_regular(
    change: Change,
    info: tarfile.TarInfo,
    chunks: Iterator[bytes],
    tar: tarfile.TarFile,
    state: EndState,
    *,
    limit: int,
) -> None:
    """Hashes the file's first ``limit`` bytes (its listed size); archives it when it fits in what is
    left of the cap, else lists it only."""
    size = change.size or 0
    fits = state.archived_bytes + size <= state.cap_bytes
    h = hashlib.sha256()
    buf = io.BytesIO() if fits else None
    got = 0
    with contextlib.suppress(OSError):
        for chunk in chunks:
            chunk = chunk[: limit - got]
            h.update(chunk)
            got += len(chunk)
            if buf is not None:
                buf.write(chunk)
            if got >= limit:
                break
    state.read_bytes += got
    change.sha256 = h.hexdigest()
    change.size = got
    if buf is None or state.archived_bytes + got > state.cap_bytes:
        state.over_cap += 1
        return
    data = buf.getvalue()
    info.type, info.size = tarfile.REGTYPE, len(data)
    tar.addfile(info, io.BytesIO(data))
    state.archived_bytes += len(data)
    change.archived = True
    if len(data) <= _KEEP_IN_MEMORY or change.path.endswith(GUARD_READS):
        state.contents[change.path] = data


def read_archived(archive: Path, path: str) -> bytes | None:
    """The archived content of ``path`` from an end-state tar, or None."""
    with contextlib.suppress(OSError, tarfile.TarError), tarfile.open(archive, "r") as tar:
        try:
            member = tar.getmember(path.lstrip("/"))
        except KeyError:
            return None
        fh = tar.extractfile(member) if member.isreg() else None
        return fh.read() if fh is not None else None
    return None


@dataclass
class StoredEndState:
    """An earlier episode's end state, to be put back into a fresh container of the same image."""

    source_episode: int
    archive: Path | None
    deleted: list[str]
    #: The whole change list (types, links, sizes): what the clean room carries is chosen from it.
    changes: list[Change] = field(default_factory=list)
    agent_cast: str = ""  # the source's recording: what produced this end state
    error_code: str | None = None  # the source's own agent error, which still stands after a regrade
    detail: str = ""


def change_from_dict(d: dict[str, Any]) -> Change:
    """A stored change (``changes_json``) back as a :class:`Change`; unknown keys ignored."""
    return Change(**{k: v for k, v in d.items() if k in Change.__dataclass_fields__})


def stored_state(stored: StoredEndState) -> EndState:
    """A stored end state as a capture would have returned it (regrade judges it like a fresh one)."""
    state = EndState(changes=list(stored.changes), archive=stored.archive, reader="stored")
    if stored.archive is not None:
        with contextlib.suppress(OSError, tarfile.TarError), tarfile.open(stored.archive, "r") as tar:
            for member in tar:
                path = "/" + member.name.lstrip("/")
                if member.islnk():  # a hard link the capture archived once: the same content
                    target = "/" + member.linkname.lstrip("/")
                    if target in state.contents:
                        state.contents[path] = state.contents[target]
                elif member.isreg() and (member.size <= _KEEP_IN_MEMORY or path.endswith(GUARD_READS)):
                    fh = tar.extractfile(member)
                    if fh is not None:
                        state.contents[path] = fh.read()
                    state.archived_bytes += member.size
    return state


def apply(sandbox: Any, state: StoredEndState) -> None:
    """Deletions first (the fresh container's own ``rm``, from the image), then the archived files, with
    their modes and owners, through the engine's archive API."""
    if state.deleted:
        code, out = sandbox.exec(["/bin/rm", "-rf", "--", *state.deleted])
        if code != 0:
            raise RuntimeError(f"could not apply deletions: {out.strip()[:300]}")
    data = state.archive.read_bytes() if state.archive is not None else b""
    if data and not sandbox.container.put_archive("/", data):
        raise RuntimeError(f"the engine refused the end state {state.archive}")


# ------------------------------------------------------------------------------ reading it back (UI, CLI)


def episode_changes(ws: Workspace, episode_id: int) -> dict[str, Any]:
    """The episode's end state as JSON-ready data: every change against the image and the tamper guard's
    findings (``allowed`` ones included, marked; ``gate`` says whether they decided the outcome: only in
    place), what crossed into the clean room (``carry``), plus capture figures and phase timings.
    ``captured`` is False for an episode without a capture (it ended before the agent finished, or
    predates capture)."""
    with session(ws.engine) as s:
        ep = queries.get_episode(s, episode_id)
        if ep is None:
            raise KeyError(f"episode {episode_id} does not exist")
        row = endstate_store.get_endstate(s, episode_id)
        phases = json.loads(ep.phases_json or "[]")
        out: dict[str, Any] = {
            "episode": episode_id,
            "outcome": ep.outcome,
            "origin": ep.origin,
            "source_episode": ep.source_episode_id,
            "phases": phases,
            "captured": row is not None,
            "verify_mode": ep.verify_mode or "in_place",  # '' ran before the clean room: in place
        }
        gate = out["verify_mode"] == "in_place"
        if row is None:
            return out | {
                "changes": [],
                "guard": {"tripped": False, "gate": gate, "findings": []},
                "carry": {},
            }
        findings = json.loads(row.findings_json)
        out |= {
            "image": row.image,
            "archive": row.archive,
            "archived_bytes": row.archived_bytes,
            "cap_bytes": row.cap_bytes,
            "over_cap": row.over_cap,
            "capture_s": row.capture_s,
            "changes": json.loads(row.changes_json),
            # ``gate``: the findings decided the outcome (in place); in the clean room they are evidence
            "guard": {"tripped": any(not f["allowed"] for f in findings), "gate": gate, "findings": findings},
            "carry": json.loads(row.carry_json or "{}"),
        }
        return out


def image_file(client: docker.DockerClient, image: str, path: str) -> bytes | None:
    """A file as the image ships it (a created, never started container; removed at once)."""
    c = client.containers.create(image, command=["true"], labels={"bandpass": "1"}, network_mode="none")
    try:
        try:
            stream, _ = c.get_archive(path)
        except docker.errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream)), mode="r") as tar:
            for member in tar:
                fh = tar.extractfile(member) if member.isreg() else None
                return fh.read() if fh is not None else None
        return None
    finally:
        with contextlib.suppress(docker.errors.APIError):
            c.remove(force=True)


def is_text(data: bytes) -> bool:
    if b"\0" in data[:8192]:
        return False
    try:
        data[:65536].decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > 65530  # a multi-byte character cut at the window's end is still text
    return True


def change_diff(
    ws: Workspace, episode_id: int, path: str, *, client: docker.DockerClient | None = None
) -> str:
    """A unified diff of one modified text file: the image's version against the policy's. Explains in
    one line instead when a side is missing or binary."""
    info = episode_changes(ws, episode_id)
    change = next((c for c in info["changes"] if c["path"] == path), None)
    if change is None:
        return f"{path}: not changed in episode {episode_id}"
    if change["kind"] == DELETED:
        return f"{path}: deleted"
    if not change["archived"]:
        size = change.get("size")
        return f"{path}: content not archived ({size} bytes, over the capture cap; sha256 {change['sha256']})"
    new = read_archived(ws.abs(info["archive"]), path) or b""
    old = b""
    if change["kind"] == MODIFIED:
        from ..sandbox.docker_engine import get_client

        got = image_file(client or get_client(), info["image"], path)
        old = got or b""
    if not (is_text(old) and is_text(new)):
        return f"{path}: binary ({len(old)} -> {len(new)} bytes)"
    lines = difflib.unified_diff(
        old.decode("utf-8", "replace").splitlines(keepends=True),
        new.decode("utf-8", "replace").splitlines(keepends=True),
        fromfile=f"image:{path}" if change["kind"] == MODIFIED else "/dev/null",
        tofile=f"episode-{episode_id}:{path}",
    )
    return "".join(lines) or f"{path}: same content, metadata changed"
