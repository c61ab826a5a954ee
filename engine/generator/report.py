"""``bandpass report generation``: what each prompt version and model yields, and what it costs.

Solvability yield = accepted / attempts, where attempts are finished generations *except* infra errors
and cancellations: an overloaded API or a stopped batch says nothing about a prompt, and counting them
would let an outage look like a worse prompt (the same rule calibration applies to infra episodes).
Cost per accepted task divides *all* the group's spend (rejected attempts included) by the accepted
count, because that is what an accepted task really costs.

Errors are split by whose they are: ``api_failures`` (the generator's API: unreachable, broken streams,
refusals, rate limits — ``infra.generator_*``, ``infra.rate_limited``), ``docker_errors``
(``infra.daemon_unavailable``) and ``internal_errors`` (Bandpass's own bugs: ``generator.internal_error``,
``generator.prompt_error``) — an outage and a bug of ours call for different people.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...store import queries
from ...store.db import session
from ..core.workspace import Workspace
from ..llm.client import is_api_code

NOT_ATTEMPTS = ("running", "error", "cancelled")


@dataclass
class YieldRow:
    prompt_version: str
    model: str
    attempts: int = 0  # finished, excluding infra errors and cancellations
    accepted: int = 0
    rejected: int = 0
    budget_exhausted: int = 0
    infra_errors: int = 0  # every ``error`` outcome; split below
    api_failures: int = 0
    docker_errors: int = 0
    internal_errors: int = 0
    cancelled: int = 0
    running: int = 0
    cost_usd: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    api_retries: int = 0
    lost_tokens_in: int = 0
    lost_tokens_out: int = 0
    wall_s: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)  # rejection codes over non-accepted attempts
    cost_known: bool = True  # False: the model has no price (pricing.py); cost_usd is not a real $0

    @property
    def yield_(self) -> float | None:
        return self.accepted / self.attempts if self.attempts else None

    @property
    def cost_per_accepted(self) -> float | None:
        if not self.cost_known:
            return None
        return self.cost_usd / self.accepted if self.accepted else None

    def top_reasons(self, n: int = 3) -> list[tuple[str, int]]:
        return sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["yield"] = self.yield_
        d["cost_per_accepted"] = self.cost_per_accepted
        if not self.cost_known:
            d["cost_usd"] = None  # unknown, not free
        d["top_reasons"] = [list(t) for t in self.top_reasons()]
        return d


def generation_report(ws: Workspace, *, model: str | None = None) -> list[YieldRow]:
    """One row per (prompt version, model), sorted by both."""
    from ..llm.pricing import PriceTable

    prices = PriceTable(ws.root)
    with session(ws.engine) as s:
        gens = queries.list_generations(s, model=model)
        rows: dict[tuple[str, str], YieldRow] = {}
        for g in gens:
            row = rows.setdefault(
                (g.prompt_version, g.model),
                YieldRow(g.prompt_version, g.model, cost_known=prices.known(g.model)),
            )
            row.cost_usd += g.cost_usd
            row.tokens_in += g.tokens_in
            row.tokens_out += g.tokens_out
            row.api_retries += g.api_retries
            row.lost_tokens_in += g.lost_tokens_in
            row.lost_tokens_out += g.lost_tokens_out
            row.wall_s += g.wall_s
            if g.outcome == "running":
                row.running += 1
                continue
            if g.outcome == "error":
                row.infra_errors += 1
                code = (g.reason or "").split(",")[0]
                if is_api_code(code):
                    row.api_failures += 1
                elif code.startswith("infra."):
                    row.docker_errors += 1
                else:
                    row.internal_errors += 1
                continue
            if g.outcome == "cancelled":
                row.cancelled += 1
                continue
            row.attempts += 1
            if g.outcome == "accepted":
                row.accepted += 1
                continue
            if g.outcome == "budget_exhausted":
                row.budget_exhausted += 1
            else:
                row.rejected += 1
            codes = [c for c in (g.reason or "").split(",") if c] or ["(none)"]
            counts = Counter(row.reasons)
            counts.update(set(codes))
            row.reasons = dict(counts)
    return [rows[k] for k in sorted(rows)]


def _usd(x: float) -> str:
    """Cents once it matters, four decimals while a test batch costs fractions of a cent."""
    return f"{x:.2f}" if x >= 10 else f"{x:.4f}"


def render_generation_report(rows: list[YieldRow]) -> Any:
    """A rich Table (imported lazily: the engine must not need rich to compute the numbers)."""
    from rich.table import Table

    t = Table(title="Generation yield per prompt version and model")
    for col, right in (
        ("prompt", False),
        ("model", False),
        ("attempts", True),
        ("accepted", True),
        ("yield", True),
        ("$/accepted", True),
        ("cost $", True),
        ("api fail", True),
        ("docker err", True),
        ("own err", True),
        ("api retries", True),
        ("top rejection reasons", False),
    ):
        t.add_column(col, justify="right" if right else "left")
    for r in rows:
        y = f"{r.yield_:.0%}" if r.yield_ is not None else "-"
        cpa = _usd(r.cost_per_accepted) if r.cost_per_accepted is not None else "-"
        if not r.cost_known:
            cpa = "unknown"
        reasons = ", ".join(f"{c} ×{n}" for c, n in r.top_reasons()) or "-"
        t.add_row(
            r.prompt_version,
            r.model,
            str(r.attempts),
            str(r.accepted),
            y,
            cpa,
            _usd(r.cost_usd) if r.cost_known else "unknown",
            str(r.api_failures),
            str(r.docker_errors),
            str(r.internal_errors),
            str(r.api_retries),
            reasons,
        )
    if not rows:
        t.add_row("(no generations)", *[""] * 11)
    return t
