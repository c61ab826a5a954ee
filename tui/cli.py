"""The ``bandpass`` command: a thin face over ``engine`` and ``store``.

Subcommands live in ``tui/commands/<area>.py``, each registering on the one Typer ``app`` here, so that
areas (tasks, rollouts, replay, tagging, export...) can grow without editing one shared file. With no
subcommand the TUI opens. An error the user caused (a ``BandpassError``, an OS refusal such as a missing
file) reaches them as one line and a non-zero exit (``BANDPASS_DEBUG=1`` for the traceback); anything
else is a bug and fails loudly, with its traceback.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, Protocol, runtime_checkable

import typer

from ..engine.core.errors import BandpassError

if TYPE_CHECKING:
    from pathlib import Path

    from ..engine.core.workspace import Workspace

app = typer.Typer(
    name="bandpass",
    help="Curate RL training data for terminal agents: generate, audit, roll out, replay, tag, export.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class State:
    workspace: str | None = None


state = State()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace", "-w", help="Workspace folder (default: $BANDPASS_HOME, else the current dir)."
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print Bandpass's version and exit.", is_eager=True),
    ] = False,
) -> None:
    if version:
        from importlib.metadata import version as installed

        typer.echo(f"bandpass {installed('bandpass')}")
        raise typer.Exit(0)
    state.workspace = workspace
    from ..engine.app import episode_hooks

    episode_hooks.install()  # every episode this command runs is diagnosed and indexed as it ends
    if ctx.invoked_subcommand is not None:  # what the first contact with the engine reaps, on stderr
        from ..engine.app import leftovers

        leftovers.set_reporter(lambda msg: typer.echo(f"bandpass: {msg}", err=True))
    if ctx.invoked_subcommand is None:
        from .app import BandpassApp

        run_tui(BandpassApp(open_workspace()))


class RunnableTui(Protocol):
    """What ``run_tui`` reads of an app (a ``SafeApp``, tui/errors.py): typed by that alone, so the test of
    the exit status passes a stand-in that has just stopped on an error."""

    @property
    def return_code(self) -> int | None: ...

    @property
    def error_log(self) -> Path | None: ...

    def run(self) -> object: ...


def run_tui(tui: RunnableTui) -> None:  # imported lazily, for start-up speed
    """Runs the TUI; an app that stopped on an error it could not survive exits non-zero, naming the log
    (tui/errors.py). Textual has printed the traceback by then."""
    tui.run()
    if tui.return_code:
        where = f"; traceback in {tui.error_log}" if tui.error_log else ""
        typer.echo(f"bandpass: error: the TUI stopped on an unexpected error{where}", err=True)
        raise typer.Exit(tui.return_code)


def open_workspace(*, create: bool = False) -> Workspace:  # imported lazily
    """The workspace ``-w`` / ``$BANDPASS_HOME`` / the current folder names, as one clear line when it is
    not one. Only commands that put something in (``create``: import, import-jobs, generate) make a new
    workspace in a folder that does not exist or holds other things; every other command opens an
    existing workspace — a folder with ``bandpass.db`` or ``bandpass.toml`` — or an empty folder, so a
    mistyped ``-w`` is an error instead of a new, empty workspace that answers "no tasks"."""
    from ..engine.core.workspace import CONFIG_NAME, DB_NAME, Workspace, resolve_root

    root = resolve_root(state.workspace)
    where = (
        "--workspace"
        if state.workspace
        else "$BANDPASS_HOME"
        if os.environ.get("BANDPASS_HOME")
        else "the current folder"
    )
    if root.exists() and not root.is_dir():
        raise fail(f"{where} {root} is a file, not a workspace folder")
    if not create:
        if not root.exists():
            raise fail(
                f"no workspace at {root} ({where}): the folder does not exist — a typo? "
                "(bandpass import TASKS creates a workspace)"
            )
        known = (root / DB_NAME).is_file() or (root / CONFIG_NAME).is_file()
        if not known and any(root.iterdir()):
            raise fail(
                f"{root} ({where}) is not a Bandpass workspace: no {DB_NAME} in a folder that holds other "
                "files — a typo? (bandpass import TASKS creates a workspace)"
            )
    try:
        return Workspace.open(root)
    except OSError as exc:
        raise fail(f"cannot open the workspace at {root}: {exc.strerror or exc}") from None


def fail(message: str, code: int = 1) -> typer.Exit:
    """Prints one error line; ``raise fail(...)`` ends the command with ``code``."""
    typer.echo(f"bandpass: error: {message}", err=True)
    return typer.Exit(code)


#: The command modules in the order ``bandpass --help`` has always listed their commands (the modules were
#: once imported by name, and some were renamed for what they hold since); a module not named here
#: registers after these, by name.
COMMAND_ORDER = (
    "export",
    "report",
    "demo",
    "diagnosis",
    "episodes",
    "machine",
    "audit",
    "generate",
    "generations",
    "jobs",
    "policy",
    "replay",
    "tagging",
    "review",
    "rewards",
    "rollouts",
    "search",
    "tasks",
)


def _register() -> None:
    import importlib
    import pkgutil

    from . import commands

    names = sorted(m.name for m in pkgutil.iter_modules(commands.__path__))
    for name in sorted(
        names, key=lambda n: (COMMAND_ORDER.index(n) if n in COMMAND_ORDER else len(COMMAND_ORDER), n)
    ):
        importlib.import_module(f"bandpass.tui.commands.{name}")


@runtime_checkable
class _UsageError(Protocol):
    """A click usage error (bad option, unknown command), from click or the copy typer vendors."""

    exit_code: int

    def show(self) -> None: ...

    def format_message(self) -> str: ...


def main() -> None:
    _register()
    try:
        rc = app(standalone_mode=False)  # click returns a typer.Exit's code instead of raising it here
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("bandpass: interrupted", err=True)
        sys.exit(130)
    except (BandpassError, OSError) as exc:  # what the user caused and can fix (an OSError: a path, a
        # permission, a full disk): one line. Anything else is a bug: Python prints its traceback, exit 1.
        if os.environ.get("BANDPASS_DEBUG"):
            raise
        typer.echo(f"bandpass: error: {exc}", err=True)
        sys.exit(1)
    except Exception as exc:  # only to recognise a usage error: anything else is re-raised, a bug
        if isinstance(exc, _UsageError):  # click/typer usage errors (typer vendors click: no public base)
            typer.echo(f"bandpass: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":  # ``python -m bandpass.tui.cli``: commands register on the importable module
    from .cli import main as _main

    _main()
