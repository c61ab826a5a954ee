"""A stored generation read turn by turn: what ``bandpass generations show`` prints and the TUI's
Generation screen shows (one reading, so the two never disagree).

The stored transcript is a flat list of entries (``meta``, ``system``, ``message``, ``api_retry``,
``audit``, ``budget``, ``api_error``, ``error``, ``finished``); :func:`read_transcript` groups it into
:class:`TurnView` s — the API retries before the reply, the reply (text, tool calls, message and request
ids, stop reason, tokens, cost), then the tool results and audits that answered it — plus the ending.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...store.models import Generation

RESULT_PREVIEW_CHARS = 1200


@dataclass
class TurnView:
    index: int
    message_id: str | None = None
    request_id: str | None = None
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float = 0.0
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    retries: list[dict[str, Any]] = field(default_factory=list)
    audits: list[dict[str, Any]] = field(default_factory=list)
    nudge: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class GenerationView:
    id: int
    prompt_version: str
    model: str
    outcome: str
    reason: str
    detail: str
    difficulty: str
    seed_axes: dict[str, Any]
    turns_taken: int
    tokens_in: int
    tokens_out: int
    lost_tokens_in: int
    lost_tokens_out: int
    cost_usd: float
    wall_s: float
    api_retries: int
    task_version_id: int | None
    created_at: str
    meta: dict[str, Any] = field(default_factory=dict)
    first_message: str = ""
    turns: list[TurnView] = field(default_factory=list)
    ending: list[dict[str, Any]] = field(default_factory=list)  # retries, errors, budget, finished
    #: False: the model has no price (engine/llm/pricing.py); its stored cost is 0 and means "unknown"
    cost_known: bool = True

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["turns"] = [t.as_dict() for t in self.turns]
        if not self.cost_known:  # unknown, never $0
            d["cost_usd"] = None
            for t in d["turns"]:
                t["cost_usd"] = None
        return d


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def read_transcript(g: Generation, *, cost_known: bool = True) -> GenerationView:
    """The attempt turn by turn. ``cost_known``: whether the model has a price (``PriceTable.known``);
    without one every cost reads "unknown", never "$0"."""
    try:
        entries = json.loads(g.transcript_json or "[]")
    except json.JSONDecodeError:
        entries = [{"type": "error", "detail": "the stored transcript is not valid JSON"}]
    view = GenerationView(
        id=g.id or 0,
        prompt_version=g.prompt_version,
        model=g.model,
        outcome=g.outcome,
        reason=g.reason,
        detail=g.detail,
        difficulty=g.difficulty,
        seed_axes=json.loads(g.seed_axes_json or "{}"),
        turns_taken=g.turns,
        tokens_in=g.tokens_in,
        tokens_out=g.tokens_out,
        lost_tokens_in=g.lost_tokens_in,
        lost_tokens_out=g.lost_tokens_out,
        cost_usd=g.cost_usd,
        wall_s=g.wall_s,
        api_retries=g.api_retries,
        task_version_id=g.task_version_id,
        created_at=g.created_at.isoformat(timespec="seconds") if g.created_at else "",
        cost_known=cost_known,
    )
    pending: list[dict[str, Any]] = []  # retries not yet followed by a reply
    current: TurnView | None = None
    names: dict[str, str] = {}
    for e in entries:
        kind = e.get("type")
        if kind == "meta":
            view.meta = {k: v for k, v in e.items() if k != "type"}
        elif kind == "system":
            continue
        elif kind == "api_retry":
            pending.append({k: v for k, v in e.items() if k != "type"})
        elif kind == "message" and e.get("role") == "assistant":
            current = TurnView(
                index=len(view.turns) + 1,
                message_id=e.get("message_id"),
                request_id=e.get("request_id"),
                stop_reason=e.get("stop_reason"),
                usage=e.get("usage") or {},
                cost_usd=e.get("cost_usd") or 0.0,
                retries=pending,
            )
            pending = []
            blocks = e.get("content") or []
            current.text = _text_of(blocks)
            for b in blocks:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    current.tool_calls.append(
                        {"id": b.get("id"), "name": b.get("name"), "input": b.get("input")}
                    )
                    names[str(b.get("id"))] = str(b.get("name"))
            view.turns.append(current)
        elif kind == "message":  # user
            content = e.get("content")
            if current is None:
                view.first_message = _text_of(content)
                continue
            results = (
                [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
                if isinstance(content, list)
                else []
            )
            for r in results:
                current.tool_results.append(
                    {
                        "tool_use_id": r.get("tool_use_id"),
                        "name": names.get(str(r.get("tool_use_id")), "?"),
                        "is_error": bool(r.get("is_error")),
                        "content": str(r.get("content", "")),
                    }
                )
            if not results:
                current.nudge = _text_of(content)
        elif kind == "audit" and current is not None:
            current.audits.append({k: v for k, v in e.items() if k != "type"})
        else:  # budget, api_error, error, finished
            view.ending.extend({"type": "api_retry", **p} for p in pending)
            pending = []
            view.ending.append(e)
    view.ending.extend({"type": "api_retry", **p} for p in pending)
    return view


def usd(cost: float | None, known: bool = True) -> str:
    """``$0.0123``, or ``cost unknown`` for a model without a price (never ``$0``)."""
    return f"${cost:.4f}" if known and cost is not None else "cost unknown"


def _short(value: Any, limit: int = 160) -> str:
    s = value if isinstance(value, str) else json.dumps(value, default=str)
    s = s.replace("\n", "⏎ ")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _retry_line(r: dict[str, Any]) -> str:
    lost = r.get("lost_usage") or {}
    lost_s = f", lost {lost.get('input_tokens', 0)} in / {lost.get('output_tokens', 0)} out" if lost else ""
    status = f"HTTP {r['status']} " if r.get("status") else ""
    what = f"{status}{r.get('code')} (waited {r.get('wait_s')}s{lost_s})"
    return f"retry {r.get('attempt', '?')} after {what}: {r.get('detail', '')}"


def render_lines(view: GenerationView, *, full: bool = False) -> list[tuple[str, str]]:
    """(style, line) pairs; style is a Rich style ("" for plain). ``full`` keeps tool results whole."""
    out: list[tuple[str, str]] = []
    add = out.append
    add(("bold", f"generation {view.id}: {view.outcome}" + (f" ({view.reason})" if view.reason else "")))
    if view.detail:
        add(("bold red" if view.outcome == "error" else "yellow", view.detail))
    add(
        (
            "",
            f"prompt {view.prompt_version} · model {view.model} · difficulty {view.difficulty} · "
            f"{view.created_at}",
        )
    )
    if view.meta.get("url") or view.meta.get("base_url"):
        add(("dim", f"endpoint {view.meta.get('url') or view.meta.get('base_url')}"))
    axes = " · ".join(f"{k}={v}" for k, v in sorted(view.seed_axes.items()))
    if axes:
        add(("dim", f"seed {axes}"))
    lost = (
        f" · lost to broken streams {view.lost_tokens_in} in / {view.lost_tokens_out} out"
        if view.lost_tokens_in or view.lost_tokens_out
        else ""
    )
    add(
        (
            "",
            f"{view.turns_taken} turn{'' if view.turns_taken == 1 else 's'} · "
            f"{view.tokens_in} in / {view.tokens_out} out · "
            f"{usd(view.cost_usd, view.cost_known)} · {view.wall_s:.1f}s · "
            f"{view.api_retries} api retries{lost}",
        )
    )
    if view.meta.get("scratch_dir"):
        add(("dim", f"files {view.meta['scratch_dir']}"))
    for t in view.turns:
        add(("", ""))
        u = t.usage
        tokens_in = sum(int(u.get(k, 0)) for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))
        tokens = f"{tokens_in} in / {u.get('output_tokens', 0)} out"
        add(
            (
                "bold magenta",
                f"── turn {t.index} · {t.message_id or '(no message id)'} · {t.stop_reason} · {tokens} · "
                f"{usd(t.cost_usd, view.cost_known)}",
            )
        )
        if t.request_id:
            add(("dim", f"   request {t.request_id}"))
        for r in t.retries:
            add(("yellow", f"   {_retry_line(r)}"))
        for line in t.text.splitlines() or ([] if not t.text else [t.text]):
            add(("", f"   {line}"))
        results = {r["tool_use_id"]: r for r in t.tool_results}
        for c in t.tool_calls:
            add(("bold cyan", f"   ▶ {c['name']} {_short(c.get('input') or {}, 200)}"))
            res = results.get(c["id"])
            if res is not None:
                body = res["content"] if full else _short(res["content"], RESULT_PREVIEW_CHARS)
                style = "red" if res["is_error"] else "dim"
                prefix = "   ✗ " if res["is_error"] else "   ◀ "
                for i, line in enumerate(body.splitlines() or [""]):
                    add((style, (prefix if i == 0 else "     ") + line))
        for a in t.audits:
            reasons = ", ".join(a.get("reasons") or []) or "no findings"
            add(("bold", f"   audit {a.get('verdict')}: {reasons}"))
        if t.nudge:
            add(("dim", f"   (nudge) {_short(t.nudge)}"))
    if view.ending:
        add(("", ""))
    for e in view.ending:
        kind = e.get("type")
        if kind == "api_retry":
            add(("yellow", _retry_line(e)))
        elif kind == "api_error":
            add(("bold red", f"api error {e.get('code')}: {e.get('detail')}"))
        elif kind == "error":
            add(("bold red", f"error: {e.get('detail')}"))
        elif kind == "budget":
            add(
                (
                    "yellow",
                    f"budget exhausted: {e.get('exhausted')}"
                    + (f" ({e['detail']})" if e.get("detail") else ""),
                )
            )
        elif kind == "finished":
            add(
                (
                    "bold",
                    f"finished: {e.get('outcome')}" + (f" ({e.get('reason')})" if e.get("reason") else ""),
                )
            )
    return out
