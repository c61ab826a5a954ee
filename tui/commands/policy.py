"""``bandpass policy check`` and ``bandpass policy serve``.

A rollout that starts against a dead or misnamed endpoint produces a batch of infra errors; ``check``
exists so a curator finds that out in one second, with a sentence saying what to fix, before queueing
hundreds of episodes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..cli import app, fail, state

if TYPE_CHECKING:
    from ...engine.core.config import Config

policy_app = typer.Typer(help="Check or serve the policy model (an OpenAI-compatible endpoint, e.g. vLLM).")
app.add_typer(policy_app, name="policy")

BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url", help="Endpoint for this run only, e.g. http://127.0.0.1:8000/v1 (no config needed)."
    ),
]


def _config() -> Config:  # imported lazily, for start-up speed
    """The workspace's ``bandpass.toml`` without opening (or creating) the database: checking an
    endpoint must not need a workspace at all."""
    from ...engine.core.config import load_config
    from ...engine.core.workspace import CONFIG_NAME, resolve_root

    return load_config(resolve_root(state.workspace) / CONFIG_NAME)


@policy_app.command("check")
def check_cmd(
    model: Annotated[
        str | None, typer.Argument(help="Model name in bandpass.toml, or the served name.")
    ] = None,
    base_url: BaseUrlOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per request.")] = 30.0,
) -> None:
    """Verify an endpoint: list its models, its window, ask for one token; say what is wrong when it fails."""
    from ...engine.app import policy
    from ...engine.core.errors import BandpassError

    try:
        report = policy.check(_config(), model, base_url, timeout=timeout)
    except BandpassError as exc:  # a broken bandpass.toml, a model that does not resolve, a dead endpoint
        raise fail(str(exc)) from None
    typer.echo(report.line)
    for warning in report.warnings:
        typer.echo(f"WARNING: {warning}", err=True)


class _Stop(Exception):
    """SIGTERM or SIGHUP arrived: stop vLLM like Ctrl-C does."""


def _raise_stop(signum: int, _frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


@policy_app.command("serve", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve_cmd(
    ctx: typer.Context,
    model: Annotated[
        str, typer.Argument(help="Model name in bandpass.toml, or what to load (a folder or hub id).")
    ],
    port: Annotated[
        int | None,
        typer.Option("--port", help="Port (default: the port of the model's base_url, else 8000)."),
    ] = None,
    wait: Annotated[
        float, typer.Option("--wait", help="Seconds to wait for /health (model loading).")
    ] = 1800.0,
    log: Annotated[
        Path | None, typer.Option("--log", help="vLLM's output (default: a file in the temp folder).")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show vLLM's output live.")] = False,
) -> None:
    """Start ``vllm serve`` for MODEL, wait until it is healthy, stop it (all of it) on Ctrl-C, SIGTERM
    or SIGHUP. Flags after ``--`` go to vLLM verbatim: bandpass policy serve M -- --dtype float32"""
    from urllib.parse import urlparse

    from ...engine.app.policy import (
        VllmProcess,
        find_vllm,
        missing_vllm_message,
        owns_port,
        port_taken,
        serve_argv,
    )
    from ...engine.core.config import PolicyModelConfig

    exe = find_vllm()
    if exe is None:
        raise fail(missing_vllm_message())
    cfg = _config().models.get(model) or PolicyModelConfig(name=model)
    if port is None:
        port = (urlparse(cfg.base_url).port or 8000) if model in _config().models else 8000
    argv = serve_argv(exe, cfg, port, list(ctx.args))
    log_path = log or Path(tempfile.gettempdir()) / f"bandpass-vllm-{port}.log"
    env = dict(os.environ)
    if cfg.api_key_env != "VLLM_API_KEY" and os.environ.get(cfg.api_key_env):
        env["VLLM_API_KEY"] = os.environ[cfg.api_key_env]  # vLLM reads its key there; never on argv
    root = f"http://127.0.0.1:{port}"
    taken = port_taken(port)
    if taken:  # vLLM would load for minutes, then die; meanwhile the other server answers /health
        raise fail(f"{taken}: stop that server, or serve on another port (--port)")
    typer.echo(f"starting: {' '.join(argv)}")
    typer.echo(f"vLLM log: {log_path}")
    server = VllmProcess(argv, log_path, echo=typer.echo if verbose else None, env=env)
    handlers = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    # Ctrl-C stops vLLM even when this process started with SIGINT ignored (a shell's background job):
    # Python installs no KeyboardInterrupt handler then, and vLLM would be left serving.
    handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    code: int | None = None
    try:
        server.start()

        def progress(waited: float) -> None:
            typer.echo(f"waiting for {root}/health: {waited:.0f}s (vLLM is loading {cfg.model_path})")

        typer.echo(f"waiting for {root}/health (vLLM is loading {cfg.model_path}; this takes minutes)")
        healthy = server.wait_healthy(root, wait, progress=progress)
        if not healthy:
            code = server.poll()
            if code is None:
                raise fail(f"vllm serve not healthy after {wait:.0f}s at {root}/health (log: {log_path})")
            _print_tail(server.tail())
            raise fail(
                f"vllm serve exited with status {code} before becoming healthy "
                f"(the last lines of its log are above; all of it: {log_path})"
            )
        if owns_port(server.pid or 0, port) is False:  # /health answered, but not by our vLLM
            raise fail(
                f"another process took port {port} while vLLM was loading ({port_taken(port) or root}); "
                f"our vLLM is stopped (log: {log_path})"
            )
        typer.echo(f"serving {cfg.served_name} at {root}/v1 (Ctrl-C to stop)")
        code = server.wait()
        _print_tail(server.tail())
        raise fail(f"vllm serve exited with status {code} (the last lines of its log are above)")
    except (KeyboardInterrupt, _Stop) as e:
        why = str(e) or "Ctrl-C"
        typer.echo(f"{why}: stopping vLLM (process group {server.pid})", err=True)
    finally:
        server.stop()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _print_tail(lines: list[str]) -> None:
    for line in lines:
        typer.echo(f"  | {line}", err=True)


def wait_for_health(root_url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    """Polls ``/health`` (vLLM answers 200 once the model is loaded); gives up early if the server died."""
    from ...engine.app.policy import wait_for_health as wait_health

    return wait_health(root_url, timeout, proc.poll if proc is not None else None)
