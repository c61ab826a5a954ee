"""The agent's terminal: an interactive bash on a docker-exec pty, held from the host.

Nothing is installed in the task image (DESIGN.md, "Sandbox and terminal"): the harness itself holds the
pty, reads it on a daemon thread so that any amount of output drains (a full pty buffer would otherwise
block the program and deadlock the step), feeds the emulator, the recording and the event bus from that
one read, and detects command completion from OSC 133 style markers that the prompt emits, never from
sleeps. Programs that never return to the prompt (full-screen editors, a ``cat`` waiting on stdin) fall
back to a quiescence window, and everything is bounded by the action's timeout.

Limit for policies: while a program reads the terminal in canonical (line) mode - ``cat > file``, a
heredoc, ``read`` - the kernel keeps at most 4095 characters per line and drops the rest. Long data must be
typed as lines shorter than that (or base64-wrapped); keystrokes as such have no size limit.
"""

from __future__ import annotations

import codecs
import contextlib
import re
import socket
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any

import docker
import requests

from ..core.errors import BandpassError
from ..core.events import EventBus, PtyInput, PtyOutput
from .asciicast import CastWriter
from .emulator import Screen

#: OSC 133 markers our prompt emits: "A" prompt start, "D;<status>" command finished.
MARKER_RE = re.compile(r"\x1b\]133;([A-D])(?:;([^\x07\x1b]*))?(?:\x07|\x1b\\)")
#: The verifier's observer reports (engine/run/observer.py): OSC 7717, an unassigned number, cut out of
#: the text when a session observes them (the verifier's); the screen and the recording keep them.
OBSERVER_RE = re.compile(r"\x1b\]7717;([^\x07\x1b]*)(?:\x07|\x1b\\)")
_OBSERVER_PREFIX = "\x1b]7717;"
#: Longest unterminated tail we hold back waiting for the rest of a marker split across reads.
_MAX_HOLD = 64
#: ... and of an observer report (a test id, the processes alive at the verifier's exit).
_MAX_REPORT_HOLD = 16384
_WRITE_CHUNK = 4096
_RECENT_CAP = 1 << 20  # recent_output() keeps the last 1 MiB
_OUTPUT_CAP = 4 << 20  # WaitResult.output keeps the last 4 MiB: a flood must not grow memory unbounded

#: The screens of the sessions running in this process, by (episode id, stream). A live pane in the same
#: process shows the session's own screen instead of parsing every byte a second time; the entry goes
#: when the session is garbage.
_LIVE_SCREENS: weakref.WeakValueDictionary[tuple[int, str], Screen] = weakref.WeakValueDictionary()


def register_live_screen(episode_id: int, stream: str, screen: Screen) -> None:
    """Publishes a session's screen to live panes in this process (done by :class:`TerminalSession`)."""
    _LIVE_SCREENS[(episode_id, stream)] = screen


def live_screen(episode_id: int, stream: str) -> Screen | None:
    """The screen a running session in this process keeps for ``(episode_id, stream)``, if any."""
    return _LIVE_SCREENS.get((episode_id, stream))


#: Silence after the prompt marker that counts as "the prompt is fully drawn".
_PROMPT_SETTLE = 0.05
PROMPT_COMMAND = "__bp_s=$?; printf '\\033]133;D;%s\\007' \"$__bp_s\""
PS1 = "\\[\\e]133;A\\a\\]\\$ "


class TerminalError(BandpassError, RuntimeError):
    """The terminal could not be started or used (no prompt, closed socket)."""


@dataclass
class WaitResult:
    completed: bool  # a command-finished marker arrived
    exit_code: int | None
    timed_out: bool
    quiescent: bool  # returned because the terminal fell silent
    output: str  # output since the send, markers stripped, echo included; the last 4 MiB at most
    duration: float


class _TailBuffer:
    """The last ``cap`` characters of a stream, appended in chunks, without copying on every append."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._chunks: deque[str] = deque()
        self._len = 0

    def append(self, text: str) -> None:
        self._chunks.append(text)
        self._len += len(text)
        while self._len - len(self._chunks[0]) >= self.cap:
            self._len -= len(self._chunks.popleft())

    def clear(self) -> None:
        self._chunks.clear()
        self._len = 0

    def tail(self, n: int | None = None) -> str:
        n = self.cap if n is None else min(n, self.cap)
        parts: list[str] = []
        size = 0
        for chunk in reversed(self._chunks):
            parts.append(chunk)
            size += len(chunk)
            if size >= n:
                break
        return "".join(reversed(parts))[-n:] if n > 0 else ""


class _MarkerScanner:
    """Strips OSC 133 markers from a stream that may split them anywhere, and reports them in order.

    With ``observe``, OSC 7717 reports are cut out too and reported as ``("O", text)``."""

    def __init__(self, observe: bool = False) -> None:
        self._hold = ""
        self._observe = observe

    def feed(self, chunk: str) -> tuple[str, list[tuple[str, str | None]]]:
        text = self._hold + chunk
        self._hold = ""
        markers: list[tuple[str, str | None]] = []
        out: list[str] = []
        pos = 0
        found = [(m.start(), m.end(), m.group(1), m.group(2)) for m in MARKER_RE.finditer(text)]
        if self._observe and _OBSERVER_PREFIX in text:
            found += [(m.start(), m.end(), "O", m.group(1)) for m in OBSERVER_RE.finditer(text)]
            found.sort()
        for start, end, kind, value in found:
            out.append(text[pos:start])
            markers.append((kind, value))
            pos = end
        rest = text[pos:]
        # An unfinished marker starts either at its own "ESC ] 133 ;" or, if still shorter than that,
        # at the last ESC (the ST that ends a marker is itself an ESC, so both are checked).
        starts = {rest.rfind("\x1b]133;"), rest.rfind("\x1b")}
        if self._observe:
            starts.add(rest.rfind(_OBSERVER_PREFIX))
        for start in sorted(starts):
            if start != -1 and self._could_hold(rest[start:]):
                out.append(rest[:start])
                self._hold = rest[start:]
                break
        else:
            out.append(rest)
        return "".join(out), markers

    def _could_hold(self, tail: str) -> bool:
        if len(tail) <= _MAX_HOLD and _could_be_marker(tail):
            return True
        return self._observe and len(tail) <= _MAX_REPORT_HOLD and _could_be_marker(tail, _OBSERVER_PREFIX)


def _could_be_marker(tail: str, prefix: str = "\x1b]133;") -> bool:
    """True while ``tail`` is an unfinished prefix of an OSC marker that starts with ``prefix``."""
    if len(tail) <= len(prefix):
        return prefix.startswith(tail)
    return tail.startswith(prefix) and "\x07" not in tail and not tail.endswith("\x1b\\")


class TerminalSession:
    """One interactive bash in a running container, driven like a person at a terminal."""

    def __init__(
        self,
        client: docker.DockerClient,
        container: Any,
        *,
        cols: int = 160,
        rows: int = 40,
        recorder: CastWriter | None = None,
        bus: EventBus | None = None,
        episode_id: int | None = None,
        stream: str = "agent",
        workdir: str | None = None,
        user: str | None = None,
        env: dict[str, str] | None = None,
        shell: str = "bash",
        observe: bool = False,
    ) -> None:
        self.client = client
        self.shell = shell  # the verifier passes an absolute path: a PATH lookup is the policy's to rig
        self.container = container
        self.screen = Screen(cols, rows)
        if episode_id is not None:
            register_live_screen(episode_id, stream, self.screen)
        self.recorder = recorder
        self.bus = bus
        self.episode_id = episode_id
        self.stream = stream
        self.workdir = workdir
        self.user = user
        self.env = dict(env or {})
        self._exec_id: str | None = None
        self._sock: socket.socket | None = None
        self._raw: Any = None
        self._reader: threading.Thread | None = None
        self._write_lock = threading.Lock()
        self._cond = threading.Condition()
        self._scanner = _MarkerScanner(observe)
        self._reports: list[str] = []  # observer reports (OSC 7717), in order: the verifier's only
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # Everything below is guarded by _cond.
        self._alive = False
        self._closed = False
        self._markers: list[tuple[str, str | None]] = []
        self._stripped = _TailBuffer(_OUTPUT_CAP)  # stripped output since the last send_and_wait
        self._recent = _TailBuffer(_RECENT_CAP)
        self._last_output = time.monotonic()
        self._at_prompt = False
        self._read_error: BaseException | None = None

    # --- lifecycle --- #

    def start(self, timeout: float = 10) -> None:
        """Start bash and wait for its first prompt, so the first action never races the shell's startup."""
        environment = {
            "TERM": "xterm-256color",
            "HISTFILE": "/dev/null",
            "COLUMNS": str(self.screen.cols),
            "LINES": str(self.screen.rows),
            **self.env,
            "PS1": PS1,
            "PROMPT_COMMAND": PROMPT_COMMAND,
        }
        api = self.client.api
        try:
            created = api.exec_create(
                self.container.id,
                [self.shell, "--norc", "--noprofile", "-i"],
                stdin=True,
                tty=True,
                environment=environment,
                workdir=self.workdir,
                user=self.user or "",
            )
            self._exec_id = created["Id"]
            self._raw = api.exec_start(self._exec_id, socket=True, tty=True)
        except docker.errors.APIError as e:
            raise TerminalError(f"cannot start bash in container {self.container.id[:12]}: {e}") from e
        self._sock = getattr(self._raw, "_sock", self._raw)
        # The SDK leaves its API timeout on the attach socket: an idle shell (a policy thinking for longer
        # than that) would make recv() time out and the terminal look dead. The reader blocks instead;
        # close() ends it by shutting the socket down.
        with contextlib.suppress(OSError, AttributeError):
            self._sock.settimeout(None)
        with self._cond:
            self._alive = True
        self._reader = threading.Thread(target=self._read_loop, name=f"pty-{self._exec_id[:8]}", daemon=True)
        self._reader.start()
        # The resize round trip (~50 ms) overlaps bash's start-up instead of adding to it.
        resizer = threading.Thread(
            target=self._exec_resize, args=(self.screen.cols, self.screen.rows), daemon=True
        )
        resizer.start()
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(kind == "A" for kind, _ in self._markers):
                left = deadline - time.monotonic()
                if left <= 0 or not self._alive:
                    tail = self._recent.tail(300)
                    why = "shell exited" if not self._alive else f"no prompt within {timeout}s"
                    raise TerminalError(
                        f"bash did not start in {self.container.id[:12]}: {why}; got {tail!r}"
                    )
                self._cond.wait(left)
            self._markers.clear()  # D markers from startup belong to no command
            self._stripped.clear()
            self._at_prompt = True
        resizer.join(timeout=max(0.0, deadline - time.monotonic()))

    def _exec_resize(self, cols: int, rows: int) -> None:
        if self._exec_id is None:
            return
        # Best effort, on its own thread: the exec may already be gone, or the engine with it (a daemon
        # stopped mid-run raises requests' ConnectionError here); the session's own reads report that.
        with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
            self.client.api.exec_resize(self._exec_id, height=rows, width=cols)

    def close(self) -> None:
        """Hang up: ``exit`` asks bash to leave, then the socket is closed so the reader thread ends."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            alive = self._alive
        if alive:
            with contextlib.suppress(OSError, TerminalError):
                self._write("\x03\x04exit\n")
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._sock.close()
        with contextlib.suppress(OSError, AttributeError):
            self._raw.close()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=5)

    def __enter__(self) -> TerminalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        with self._cond:
            return self._alive

    # --- reading --- #

    def _read_loop(self) -> None:
        assert self._sock is not None
        try:
            while True:
                data = self._sock.recv(65536)
                if not data:
                    break
                self._on_output(self._decoder.decode(data))
        except OSError as e:
            with self._cond:
                if not self._closed:
                    self._read_error = e
        finally:
            tail = self._decoder.decode(b"", final=True)
            if tail:
                self._on_output(tail)
            with self._cond:
                self._alive = False
                self._cond.notify_all()

    def _on_output(self, text: str) -> None:
        if not text:
            return
        # The screen and the cast get the raw stream (markers included: the emulator ignores them and a
        # replay can find command boundaries in them); the policy-facing text has them stripped.
        self.screen.feed(text)
        if self.recorder is not None and not self.recorder.closed:
            with contextlib.suppress(ValueError):
                self.recorder.output(text)
        if self.bus is not None:
            self.bus.publish(PtyOutput(episode_id=self.episode_id, stream=self.stream, data=text))
        stripped, markers = self._scanner.feed(text)
        with self._cond:
            self._last_output = time.monotonic()
            if stripped:
                self._stripped.append(stripped)
                self._recent.append(stripped)
            for kind, value in markers:
                if kind == "A":
                    self._at_prompt = True
                elif kind == "O":
                    self._reports.append(value or "")
            self._markers.extend(m for m in markers if m[0] != "O")
            self._cond.notify_all()

    def reports(self) -> list[str]:
        """The observer reports (OSC 7717) seen so far, in order (``observe`` sessions only)."""
        with self._cond:
            return list(self._reports)

    def screen_text(self) -> str:
        return self.screen.text()

    def recent_output(self, max_bytes: int) -> str:
        """The last ``max_bytes`` (UTF-8) of output, markers stripped: a policy's capped observation."""
        if max_bytes <= 0:
            return ""
        with self._cond:
            text = self._recent.tail(max_bytes)  # characters >= bytes, so this is enough text
        raw = text.encode("utf-8")[-max_bytes:]
        return raw.decode("utf-8", errors="ignore")

    # --- writing --- #

    def _write(self, data: str) -> None:
        if self._sock is None:
            raise TerminalError("terminal not started")
        raw = data.encode("utf-8")
        with self._write_lock:
            try:
                for i in range(0, len(raw), _WRITE_CHUNK):
                    self._sock.sendall(raw[i : i + _WRITE_CHUNK])
            except OSError as e:
                raise TerminalError(f"terminal closed while writing: {e}") from e

    def send(self, keys: str) -> None:
        """Write keys verbatim. Chunked so that a large paste interleaves with the reader's draining."""
        if not keys:
            return
        if not self.alive:
            raise TerminalError("terminal is not alive (shell exited or container died)")
        # Only a line end leaves the prompt; editing keys (arrows, a partial line) do not.
        if "\n" in keys or "\r" in keys:
            with self._cond:
                self._at_prompt = False
        if self.recorder is not None and not self.recorder.closed:
            self.recorder.input(keys)
        if self.bus is not None:
            self.bus.publish(PtyInput(episode_id=self.episode_id, stream=self.stream, data=keys))
        self._write(keys)

    def send_and_wait(self, keys: str, timeout: float, quiescence: float = 2.0) -> WaitResult:
        """Send keys and wait for the command-finished marker, or for silence, or for the timeout.

        The marker is expected only when the keys end a line typed at the shell's prompt; any other
        input (typing into a running program, a partial line) can only end by silence. A full-screen
        program switching to the alternate screen also makes silence the signal, since it will not
        return to the prompt on its own.
        """
        start = time.monotonic()
        with self._cond:
            expect_marker = self._at_prompt and keys.endswith(("\n", "\r"))
            self._markers.clear()
            self._stripped.clear()
            self._last_output = start
        self.send(keys)
        deadline = start + timeout
        exit_code: int | None = None
        completed = timed_out = quiescent = False
        with self._cond:
            while True:
                done = next((m for m in self._markers if m[0] == "D"), None)
                if done is not None:
                    completed = True
                    exit_code = _status(done[1])
                    # The prompt follows the D marker within milliseconds; wait for it so the screen
                    # the policy sees next already shows the prompt.
                    prompt_deadline = min(deadline, time.monotonic() + 1.0)
                    idx = self._markers.index(done)
                    while not any(k == "A" for k, _ in self._markers[idx:]) and self._alive:
                        left = prompt_deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                    # The prompt's own tail (readline's erase-to-end-of-line) may arrive in the next
                    # read: wait for a short silence so the observation holds the whole prompt.
                    while self._alive:
                        now = time.monotonic()
                        left = min(prompt_deadline, self._last_output + _PROMPT_SETTLE) - now
                        if left <= 0:
                            break
                        self._cond.wait(left)
                    break
                now = time.monotonic()
                if not self._alive:
                    break
                if now >= deadline:
                    timed_out = True
                    break
                silence_ends = self._last_output + quiescence
                use_silence = not expect_marker or self.screen.alternate_screen
                if use_silence and now >= silence_ends:
                    quiescent = True
                    break
                self._cond.wait((min(deadline, silence_ends) if use_silence else deadline) - now)
            output = self._stripped.tail()
        return WaitResult(
            completed=completed,
            exit_code=exit_code,
            timed_out=timed_out,
            quiescent=quiescent,
            output=output,
            duration=time.monotonic() - start,
        )

    def run(self, command: str, timeout: float = 30) -> WaitResult:
        """Type one command line and wait for it to finish (convenience for harness-side commands)."""
        return self.send_and_wait(command + "\n", timeout=timeout)

    def interrupt(self, settle: float = 1.0) -> None:
        """Send C-c and give the shell up to ``settle`` seconds to print its prompt.

        Without the wait, the next ``run`` would race the interrupted command's own finished-marker
        (status 130) and report it as its own. Returns early on the marker, or after 0.25 s of silence
        (a full-screen program that swallows C-c prints no prompt).
        """
        with self._cond:
            self._markers.clear()
            self._last_output = time.monotonic()
        self.send("\x03")
        deadline = time.monotonic() + settle
        with self._cond:
            while self._alive and not any(k == "A" for k, _ in self._markers):
                now = time.monotonic()
                wake = min(deadline, self._last_output + 0.25)
                if now >= wake:
                    break
                self._cond.wait(wake - now)

    def resize(self, cols: int, rows: int) -> None:
        self.screen.resize(cols, rows)
        self._exec_resize(cols, rows)
        if self.recorder is not None and not self.recorder.closed:
            self.recorder.resize(cols, rows)


def _status(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
