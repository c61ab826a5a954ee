"""The ``bandpass`` command: a thin face over ``engine`` and ``store``.

Subcommands live in ``tui/commands/<area>.py``, each registering on the one Typer ``app`` here, so that
areas (tasks, engine, rollouts, replay, export...) can grow without editing one shared file. With no
subcommand the TUI opens. Every error reaches the user as one line and a non-zero exit; set
``BANDPASS_DEBUG=1`` for the traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

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
) -> None:
    state.workspace = workspace
    if ctx.invoked_subcommand is None:
        from engine.core.workspace import Workspace
        from tui.app import BandpassApp

        BandpassApp(Workspace.open(workspace)).run()


def open_workspace():  # noqa: ANN201 - returns engine.core.workspace.Workspace, imported lazily for start-up speed
    from engine.core.workspace import Workspace

    return Workspace.open(state.workspace)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Prints one error line; ``raise fail(...)`` ends the command with ``code``."""
    typer.echo(f"bandpass: error: {message}", err=True)
    return typer.Exit(code)


def _register() -> None:
    import importlib
    import pkgutil

    import tui.commands

    for mod in sorted(pkgutil.iter_modules(tui.commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"tui.commands.{mod.name}")


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
    except Exception as exc:  # the one place a stray exception becomes a clean line
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # click/typer usage errors
            typer.echo(f"bandpass: error: {exc.format_message()}", err=True)  # type: ignore[attr-defined]
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        if os.environ.get("BANDPASS_DEBUG"):
            raise
        typer.echo(f"bandpass: error: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # ``python -m tui.cli``: run the importable module so commands register on it
    from tui.cli import main as _main

    _main()
