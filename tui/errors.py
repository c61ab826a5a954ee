"""Unexpected errors in the TUI: shown in the app, logged to the workspace, never a silent exit.

Why: a curator's key press must never end the session. Textual's default for an exception in a handler,
an action or a worker is to tear the app down and print a traceback (and ``bandpass`` then exited 0, so
a script could not even tell). Here an exception becomes a red notification that names what failed and
where its traceback went, the traceback is appended to ``<workspace>/logs/tui-errors.log`` (secrets
redacted), and the session goes on. What cannot be survived (an error that stopped one of Textual's own
message loops) still ends the app, but logged, and the process exits non-zero.

Three places catch: :class:`Guarded` (a mixin for the app, its screens and widgets: any message or event
handler), and :class:`SafeApp` (the app's mixin): ``run_action`` (every key binding and palette command)
and ``_handle_exception`` (workers and timers; the rest is fatal).

A refusal is not unexpected: a ``BandpassError`` (a tag the taxonomy lacks, a dead endpoint, no Docker
engine) is something the curator caused and can fix, and becomes a notification in one place,
:func:`refusals` / :func:`show_refusal` (worded by :func:`refusal`), from the UI thread or a worker
alike.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.core.errors import BandpassError

LOG_NAME = Path("logs") / "tui-errors.log"
#: The log is kept short: a session that hits one bug thousands of times must not fill the disk.
MAX_LOG_BYTES = 2_000_000


def log_path(root: Path) -> Path:
    return root / LOG_NAME


def write_log(root: Path | None, exc: BaseException, where: str) -> Path | None:
    """Appends ``exc``'s traceback to the workspace's error log; returns the log's path (None when the
    workspace is unknown or not writable: the error is still shown)."""
    if root is None:
        return None
    from ..engine.core.redact import Redactor

    path = log_path(root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > MAX_LOG_BYTES:
            path.replace(path.with_suffix(".log.1"))
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        stamp = dt.datetime.now().isoformat(timespec="seconds")
        with path.open("a", encoding="utf-8") as f:
            f.write(f"--- {stamp} {where}\n{Redactor().text(text)}\n")
    except OSError:
        return None
    return path


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def refusal(exc: BaseException, *, named: bool = False) -> str:
    """The line a refusal is shown as: its message (a ``BandpassError``'s message is written for the
    curator); ``named`` puts its class first, where what failed is a whole run (a batch, a round, an
    audit) and the kind of refusal says where to look."""
    return f"{type(exc).__name__}: {exc}" if named else str(exc)


@contextlib.contextmanager
def refusals(
    node: Any,
    *,
    title: str = "",
    severity: SeverityLevel = "error",
    timeout: float | None = None,
    named: bool = False,
    escape: bool = False,
) -> Iterator[None]:
    """A ``BandpassError`` raised inside becomes ``node``'s notification (:func:`show_refusal`) and the
    code after the block goes on; anything else is unexpected and reaches :class:`SafeApp`. On the UI
    thread or in a worker alike."""
    try:
        yield
    except BandpassError as exc:
        show_refusal(node, exc, title=title, severity=severity, timeout=timeout, named=named, escape=escape)


def show_refusal(
    node: Any,
    exc: BaseException,
    *,
    title: str = "",
    severity: SeverityLevel = "error",
    timeout: float | None = None,
    named: bool = False,
    escape: bool = False,
) -> None:
    """Notifies a refusal as :func:`refusal` words it (``escape``: shown verbatim, never read as markup),
    for a block that must also do more on a refusal (:func:`refusals` is the usual way)."""
    from rich.markup import escape as markup_escape

    text = refusal(exc, named=named)
    if escape:
        text = markup_escape(text)
    app = node.app
    try:  # from a worker: the notification is made on the UI thread before the worker goes on
        app.call_from_thread(app.notify, text, title=title, severity=severity, timeout=timeout)
    except RuntimeError:  # on the app's own thread
        app.notify(text, title=title, severity=severity, timeout=timeout)


def left_behind(node: Any) -> bool:
    """Whether ``node`` belongs to a screen the curator already left (dismissed: in no mode's screen
    stack). A key or a message can still reach such a screen while Textual removes it — a fast Enter then
    Escape under load — and what fails there (a widget already gone) is no error of the session's."""
    from textual.screen import Screen

    try:
        screen = node if isinstance(node, Screen) else node.screen
        stacks = node.app._screen_stacks  # every mode's stack, the only record of it
    except Exception:  # noqa: BLE001 - no screen or no app any more: removed
        return True
    return not any(screen in stack for stack in stacks.values())


if TYPE_CHECKING:  # what the mixins are mixed into, so their super() calls are checked against it
    from textual.app import App
    from textual.message_pump import MessagePump
    from textual.notifications import SeverityLevel

    _GuardedBase = MessagePump
    _SafeAppBase = App[Any]
else:
    _GuardedBase = _SafeAppBase = object


class Guarded(_GuardedBase):
    """Mixin: an exception in any of this node's message or event handlers is reported (shown, logged)
    instead of stopping the node's message loop — which in Textual kills the app.

    Put it first in the bases (``class TasksScreen(Guarded, Screen[None])``). It wraps Textual's
    ``MessagePump._on_message``, the one method every handler call goes through;
    ``tests/tui/test_tui_crash.py`` fails if a Textual upgrade changes that.
    """

    async def _on_message(self, message: Any) -> None:
        try:
            await super()._on_message(message)
        except Exception as exc:  # the point: shown and logged, never fatal
            report = getattr(self.app, "report_unexpected", None)
            if report is None:
                raise
            if left_behind(self):  # a screen already dismissed: nothing the curator sees failed
                return
            report(exc, f"{type(self).__name__} handling {type(message).__name__}")


class SafeApp(Guarded, _SafeAppBase):
    """Mixin for an ``App`` (``class BandpassApp(SafeApp, App[None])``): reports what the session
    survives and ends it — logged, ``return_code`` 1 — only on what it cannot survive. The app sets
    ``error_root`` (its workspace's root; None: shown, not logged)."""

    error_root: Path | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._safe_init()

    def _safe_init(self) -> None:
        if not hasattr(self, "unexpected"):
            #: Every unexpected error this session survived, "where: Type: message" (tests read it).
            self.unexpected: list[str] = []
            #: Where the last unexpected error's traceback went (the CLI names it after a fatal one).
            self.error_log: Path | None = None
            #: Under a test pilot (headless), a survived error still fails the test at the end; a test
            #: that expects one turns this off.
            self.raise_unexpected_in_tests = True

    def report_unexpected(self, exc: BaseException, where: str) -> None:
        """Shows an exception the session survives and logs its traceback to the workspace."""
        self._safe_init()
        self.error_log = write_log(self.error_root, exc, where) or self.error_log
        self.unexpected.append(f"{where}: {describe(exc)}")
        app: Any = self
        if app.is_headless and self.raise_unexpected_in_tests and app._exception is None:
            app._exception = exc  # run_test re-raises it when the test's pilot ends
        logged = f"\ntraceback in {self.error_log}" if self.error_log else ""
        with contextlib.suppress(Exception):  # reporting must never raise in its turn
            app.notify(
                f"{describe(exc)}\n({where}; the app goes on){logged}",
                title="Unexpected error",
                severity="error",
                timeout=12,
                markup=False,
            )

    async def run_action(self, action: Any, default_namespace: Any = None, namespaces: Any = None) -> bool:
        """Every key binding and palette command goes through here: one that raises is reported and the
        key counts as handled, so a failing action never ends the session. A key that reaches a screen
        still being built (pushed, its widgets not mounted yet: Enter then a fast key under load) is
        dropped, as if pressed a moment earlier: its actions assume the screen's widgets."""
        from textual.widget import Widget

        if isinstance(default_namespace, Widget) and not default_namespace.is_mounted:
            return True
        try:
            return await super().run_action(action, default_namespace, namespaces)
        except Exception as exc:  # noqa: BLE001 - shown and logged
            if (
                default_namespace is not None
                and default_namespace is not self
                and left_behind(default_namespace)
            ):
                return True  # a key that reached a screen already dismissed
            self.report_unexpected(exc, f"action {action if isinstance(action, str) else action[1]!r}")
            return True

    def _handle_exception(self, error: Exception) -> None:
        """Textual calls this for what no handler caught. A failed worker or timer callback is survived
        (their loops go on); anything else stopped a message loop, so the app ends — logged, exit 1."""
        from textual.worker import WorkerFailed

        self._safe_init()
        if isinstance(error, WorkerFailed):
            self.report_unexpected(error.error, "a background task")
            return
        tb = error.__traceback__
        if tb is not None and tb.tb_frame.f_code.co_name in ("_tick", "_flush_next_callbacks"):
            self.report_unexpected(error, "a timer or a deferred call")
            return
        self.error_log = write_log(self.error_root, error, "fatal: the app stopped") or self.error_log
        self.unexpected.append(f"fatal: {describe(error)}")
        super()._handle_exception(error)
