"""Attribution as text: the one-line summary and the facts behind it for CLI tables, ``bandpass show``,
the tagging queue and the TUI, from the evidence dict or its stored JSON.

Separate because rendering reads stored evidence long after the episode (no container, no watcher), and
front ends import only this. The read of an episode's stored evidence is the application's
(``engine.app.reads.episode_evidence``): the sandbox never touches the store.
"""

from __future__ import annotations

import json
from typing import Any

from ...core.plural import counted


def summary(evidence: dict[str, Any] | str | None) -> str:
    """One line for CLI tables: who ended the sandbox and why; an OOM the agent survived is shown too.
    Takes the evidence dict or the stored JSON; empty when there is nothing to say."""
    if isinstance(evidence, str):
        try:
            evidence = json.loads(evidence) if evidence else None
        except json.JSONDecodeError:
            return ""
    if not isinstance(evidence, dict) or not evidence:
        return ""
    verdict = evidence.get("verdict") or {}
    if verdict:
        return f"{verdict.get('by', '?')}: {verdict.get('why', '')}"
    ooms = sum(1 for e in evidence.get("events", []) if e.get("action") == "oom")
    if ooms:
        killed = counted(ooms, "process", "processes")
        return f"policy: {killed} OOM-killed under the {evidence.get('memory_limit_mb')} MB limit"
    return ""


def _loads(evidence: dict[str, Any] | str | None) -> dict[str, Any]:
    if isinstance(evidence, str):
        try:
            evidence = json.loads(evidence) if evidence else None
        except json.JSONDecodeError:
            return {}
    return evidence if isinstance(evidence, dict) else {}


def facts(evidence: dict[str, Any] | str | None) -> str:
    """The evidence behind ``summary`` in one line: the container's end (status, exit code, OOMKilled),
    the engine's events (kill with its signal, die with its exit code, oom), Bandpass's own stops, and
    the pid, disk and control figures that decided. Empty when nothing ended the sandbox."""
    ev = _loads(evidence)
    if not ev or not (ev.get("verdict") or any(e.get("action") == "oom" for e in ev.get("events", []))):
        return ""
    parts: list[str] = []
    status = ev.get("status")
    if status and status != "running":
        parts.append(
            f"container {status}" + (f" {ev['exit_code']}" if ev.get("exit_code") is not None else "")
        )
    if ev.get("oom_killed"):
        parts.append("OOMKilled")
    if ev.get("terminal_alive") is False:
        code = ev.get("shell_exit_code")
        parts.append("agent shell ended" + (f" {code}" if code is not None else ""))
    shown = []
    for e in ev.get("events", []):
        if e.get("action") == "kill":
            shown.append(f"kill(signal {e.get('signal', '?')})")
        elif e.get("action") == "die":
            shown.append(f"die(exit {e.get('exit_code', '?')})")
        elif e.get("action") == "oom":
            shown.append("oom")
    if shown:
        parts.append("engine: " + ", ".join(shown[:6]) + (" …" if len(shown) > 6 else ""))
    elif "events" in ev:
        parts.append("no kill/die/oom event from the engine")
    if ev.get("harness_stops"):
        parts.append("Bandpass: " + "; ".join(ev["harness_stops"]))
    if ev.get("pids_limit_hits"):
        parts.append(
            f"pids {ev.get('pids_current')}/{ev.get('pids_limit')}, "
            f"{counted(ev['pids_limit_hits'], 'fork')} refused"
        )
    if ev.get("disk_over_limit"):
        parts.append(f"disk {ev.get('disk_used_mb')} MB of {ev.get('storage_limit_mb')} MB allowed")
    ctl = ev.get("control") or {}
    if "reward" in ctl:
        parts.append(
            f"control (fresh container): reward {ctl['reward']}"
            + (f" after {ctl['failed_with']}" if ctl.get("failed_with") else "")
        )
    if ev.get("daemon_healthy") is False:
        parts.append("daemon not answering")
    return " · ".join(parts)
