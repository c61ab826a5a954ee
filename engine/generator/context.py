"""What the workspace tells the meta-agent: example tasks, the last failure, tasks that are too easy.

These are the "context extension" of prompt version v2-context (examples, last failure) and the band
feedback of ``--target-model`` (too easy). Each returns plain text blocks; the prompt version's section
templates decide how (and whether) they are shown.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from ...store import queries
from ...store.db import session
from ..calibration.calibrate import band_status, estimates
from ..core.workspace import Workspace
from ..tasks.taskdir import task_files

_EXAMPLE_FILE_CHARS = 2500


def example_tasks(ws: Workspace, n: int, rng: random.Random, max_chars: int = 6000) -> list[str]:
    """Up to ``n`` accepted tasks of the workspace, each rendered file by file (cut at ``max_chars``).

    Sampled with the batch's rng among all accepted tasks, so a batch does not copy the same two
    examples into every attempt (which would pull every new task towards them).
    """
    if n <= 0:
        return []
    with session(ws.engine) as s:
        rows = [r for r in queries.task_rows(s) if r.audit == "accepted"]
    if not rows:
        return []
    picked = rng.sample(rows, min(n, len(rows)))
    return [_render_task(r.name, ws.abs(r.path), max_chars) for r in picked]


def _render_task(name: str, path: Path, max_chars: int) -> str:
    parts = [f"### Example task: {name}"]
    for f in task_files(path):
        rel = f.relative_to(path).as_posix()
        try:
            text = f.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            parts.append(f"`{rel}`: (binary, {f.stat().st_size} bytes)")
            continue
        if len(text) > _EXAMPLE_FILE_CHARS:
            text = text[:_EXAMPLE_FILE_CHARS] + f"\n[... {len(text) - _EXAMPLE_FILE_CHARS} more chars ...]"
        parts.append(f"`{rel}`:\n```\n{text.rstrip()}\n```")
    out = "\n\n".join(parts)
    if len(out) > max_chars:
        out = out[:max_chars] + "\n[... example cut ...]"
    return out


def last_failure(ws: Workspace) -> str:
    """The workspace's most recent failed generation: its outcome, reason and last audit's findings."""
    with session(ws.engine) as s:
        g = queries.last_failed_generation(s)
        if g is None:
            return ""
        outcome, reason, transcript = g.outcome, g.reason, g.transcript_json
        axes = g.seed_axes_json
    lines = [f"Outcome: {outcome} ({reason})"]
    try:
        seed = json.loads(axes)
        if seed:
            lines.append("It was asked for: " + "; ".join(f"{k}: {v}" for k, v in seed.items()))
    except ValueError:
        pass
    try:
        entries = json.loads(transcript)
    except ValueError:
        entries = []
    audits = [e for e in entries if isinstance(e, dict) and e.get("type") == "audit"]
    if audits:
        last = audits[-1]
        lines.append(f"Its last audit said {last.get('verdict')}:")
        for f in last.get("findings", [])[:8]:
            lines.append(f"- {f.get('code')}: {str(f.get('detail'))[:400]}")
    return "\n".join(lines)


def too_easy_tasks(ws: Workspace, target_model: str, limit: int = 3) -> list[str]:
    """Instructions of tasks ``target_model`` already solves at pass@k above the band's top.

    Uses the workspace's band settings and the calibration module's estimator and band rule, so "too
    easy" here means exactly what the calibration report and export call "above".
    """
    if limit <= 0:
        return []
    band = ws.config.band
    ests = estimates(ws, target_model, ks=(band.k,))
    above = [e for e in ests if band_status(e, band.lo, band.hi, band.min_samples, band.k) == "above"]
    above.sort(key=lambda e: (-(e.pass_at.get(band.k) or 0.0), e.task))
    out = []
    for e in above[:limit]:
        p = e.pass_at.get(band.k)
        text = e.instruction.strip()
        if len(text) > 1200:
            text = text[:1200] + " [...]"
        out.append(f"### {e.task} (pass@{band.k} = {p:.2f} over {e.n} attempts)\n{text}")
    return out
