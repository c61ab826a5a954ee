"""Checking a reviewer's answer before anything of it is stored as evidence.

Two kinds of wrong answer, treated differently on purpose:

* **malformed** input (not JSON, missing or mistyped fields, a verdict outside the enum) breaks the tool's
  contract: the model gets a clear ``is_error`` tool_result naming each problem and may try again;
* **untrustworthy content** in a well-formed answer (a class not in the taxonomy, a step that does not
  exist, a quote that is not in the stored record) is *dropped and counted*, never trusted and never sent
  back: asking again would only teach the model to hide the guess better, and the counts are what tells a
  curator how far this reviewer can be believed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from ..core.taxonomy import Taxonomy, TaxonomyError
from .review_context import EpisodeContext, normalise

VERDICTS = ("true_pass", "false_pass", "true_fail", "false_fail", "infra")
NO_CODE = "none"
#: The taxonomy's valid failure: what a ``true_fail`` verdict with no code means (the policy simply did
#: not do the task), so such a review can be accepted as a tag like any other.
VALID_FAILURE = "policy.failed_checks"


def review_code(review: Any) -> str:
    """A stored review's ``class.subclass``: its own code; else, for a ``true_fail`` whose answer was
    ``none`` (reviews stored before the taxonomy had a valid failure), the valid failure; else ``""``
    (no suggestion). A code validation *dropped* (not in the taxonomy) maps to nothing: the reviewer
    meant some other class, and a guess is never trusted."""
    if review.tag_class:
        return f"{review.tag_class}.{review.subclass}"
    dropped = json.loads(getattr(review, "dropped_json", "") or "[]")
    if review.verdict == "true_fail" and not any(d.get("what") == "code" for d in dropped):
        return VALID_FAILURE
    return ""


def schema_problems(data: Any, schema: dict[str, Any]) -> list[str]:
    """Every way ``data`` breaks the tool's input schema, as 'field: problem' lines (empty when valid)."""
    validator = jsonschema.Draft202012Validator(schema)
    out = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in err.absolute_path) or "(input)"
        out.append(f"{where}: {err.message}")
    return out


@dataclass
class CheckedAnswer:
    verdict: str
    tag_class: str
    subclass: str
    explanation: str
    citations: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def code(self) -> str:
        return f"{self.tag_class}.{self.subclass}" if self.tag_class else ""


def check_answer(answer: dict[str, Any], ctx: EpisodeContext, taxonomy: Taxonomy) -> CheckedAnswer:
    """Keeps what the stored record supports; everything else goes to ``dropped`` with its reason.

    ``answer`` has already passed :func:`schema_problems`.
    """
    out = CheckedAnswer(
        verdict=answer["verdict"], tag_class="", subclass="", explanation=answer["explanation"].strip()
    )
    code = answer["code"].strip()
    if (not code or code == NO_CODE) and out.verdict == "true_fail" and VALID_FAILURE in taxonomy.names():
        code = VALID_FAILURE
    if code and code != NO_CODE:
        try:
            out.tag_class, out.subclass = taxonomy.parse(code)
        except TaxonomyError as exc:
            out.dropped.append({"what": "code", "value": code, "reason": f"unknown class: {exc}"})
    for i, cite in enumerate(answer["citations"]):
        source, quote = cite["source"], cite["quote"]
        step = cite.get("step")
        if source == "step":
            if step is None:
                out.dropped.append(
                    {"what": "citation", "index": i, "reason": "source step without a step number"}
                )
                continue
            key = f"step:{step}"
            if key not in ctx.records:
                out.dropped.append(
                    {
                        "what": "citation",
                        "index": i,
                        "step": step,
                        "reason": f"step {step} does not exist (the episode has {ctx.step_count} steps)",
                    }
                )
                continue
        else:
            key = source
        want = normalise(quote)
        if not want:
            out.dropped.append({"what": "citation", "index": i, "reason": "empty quote"})
            continue
        if want not in normalise(ctx.records.get(key, "")):
            where = f"step {step}" if source == "step" else source
            out.dropped.append(
                {
                    "what": "citation",
                    "index": i,
                    "quote": quote[:200],
                    "reason": f"quote not in the stored {where}",
                }
            )
            continue
        kept = {"source": source, "quote": quote}
        if source == "step":
            kept["step"] = step
        out.citations.append(kept)
    return out
