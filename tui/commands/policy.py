"""``bandpass policy check`` and ``bandpass policy serve``.

A rollout that starts against a dead or misnamed endpoint produces a batch of infra errors; ``check``
exists so a curator finds that out in one second, with a sentence saying what to fix, before queueing
hundreds of episodes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from typing import Annotated

import typer

from tui.cli import app, fail, state

policy_app = typer.Typer(help="Check or serve the policy model (an OpenAI-compatible endpoint, e.g. vLLM).")
app.add_typer(policy_app, name="policy")

BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url", help="Endpoint for this run only, e.g. http://127.0.0.1:8000/v1 (no config needed)."
    ),
]


def _config():  # noqa: ANN202 - engine.core.config.Config, imported lazily for start-up speed
    """The workspace's ``bandpass.toml`` without opening (or creating) the database: checking an
    endpoint must not need a workspace at all."""
    from engine.core.config import load_config
    from engine.core.workspace import CONFIG_NAME, resolve_root

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
    from engine.run.policy.client import PolicyInfraError, check_endpoint, describe_check, resolve_model

    try:
        cfg = resolve_model(_config(), model, base_url)
    except ValueError as e:
        raise fail(str(e)) from None
    try:
        report = check_endpoint(cfg, timeout=timeout)
    except PolicyInfraError as e:
        raise fail(e.detail) from None
    typer.echo(describe_check(report))
    for warning in report.warnings:
        typer.echo(f"WARNING: {warning}", err=True)


@policy_app.command("serve")
def serve_cmd(
    model: Annotated[str, typer.Argument(help="Model name in bandpass.toml, or a Hugging Face model id.")],
    port: Annotated[int, typer.Option("--port", help="Port for the OpenAI-compatible server.")] = 8000,
    wait: Annotated[
        float, typer.Option("--wait", help="Seconds to wait for /health (model loading).")
    ] = 1800.0,
) -> None:
    """Start ``vllm serve`` for MODEL and wait until it is healthy (needs the ``gpu`` extra)."""
    from engine.core.config import PolicyModelConfig

    exe = shutil.which("vllm")
    if exe is None:
        raise fail("vllm is not installed: pip install 'bandpass[gpu]' (needs a CUDA GPU)")
    # The served name doubles as the model to load (a Hugging Face id or a local path), as in vLLM.
    cfg = _config().models.get(model) or PolicyModelConfig(name=model)
    argv = [
        exe,
        "serve",
        cfg.served_name,
        "--port",
        str(port),
        "--served-model-name",
        cfg.served_name,
        "--max-model-len",
        str(cfg.context_window),
    ]
    typer.echo(f"starting: {' '.join(argv)}")
    proc = subprocess.Popen(argv)
    try:
        ok = wait_for_health(f"http://127.0.0.1:{port}", wait, proc)
        if not ok:
            code = proc.poll()
            if code is not None:
                raise fail(
                    f"vllm serve exited with status {code} before becoming healthy (see its output above)"
                )
            raise fail(f"vllm serve not healthy after {wait:.0f}s at http://127.0.0.1:{port}/health")
        typer.echo(f"serving {cfg.served_name} at http://127.0.0.1:{port}/v1 (Ctrl-C to stop)")
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    if proc.returncode not in (0, None, -15):
        sys.exit(proc.returncode)


def wait_for_health(root_url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    """Polls ``/health`` (vLLM answers 200 once the model is loaded); gives up early if the server died."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            if httpx.get(f"{root_url}/health", timeout=2.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False
