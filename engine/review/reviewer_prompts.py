"""Reviewer prompt versions: files under ``engine/prompts/reviewer/<version>/``, never inline.

Like the generator's prompts, a version is frozen once reviews used it: every stored review names its
version, and the agreement report compares versions only if a version's text never changes under it.
A folder holds ``prompt.toml`` (description, ``[limits]``), ``system.md``, ``user.md`` (placeholders
``{{context}}`` and ``{{taxonomy}}``) and ``tools.json`` (must define ``submit_review``).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..llm.templates import PromptError, render
from .review_context import ContextLimits

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts" / "reviewer"
DEFAULT_VERSION = "v1"
SUBMIT_TOOL = "submit_review"


@dataclass(frozen=True)
class ReviewerPrompt:
    name: str
    path: Path
    description: str
    system: str
    user: str
    tools: list[dict[str, Any]]
    limits: ContextLimits
    max_tool_errors: int = 2
    max_tokens: int = 2048

    @property
    def submit_schema(self) -> dict[str, Any]:
        return next(t["input_schema"] for t in self.tools if t["name"] == SUBMIT_TOOL)

    def render_user(self, context: str, taxonomy: str) -> str:
        return render(self.user, {"context": context, "taxonomy": taxonomy}, where=f"{self.name}/user.md")


def available_versions(root: Path = PROMPTS_DIR) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "prompt.toml").is_file())


def load_reviewer_prompt(name: str = DEFAULT_VERSION, root: Path = PROMPTS_DIR) -> ReviewerPrompt:
    path = root / name
    if "/" in name or not (path / "prompt.toml").is_file():
        known = ", ".join(available_versions(root)) or "none"
        raise PromptError(f"reviewer prompt version {name!r} not found in {root} (available: {known})")
    problems: list[str] = []
    try:
        meta = tomllib.loads((path / "prompt.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PromptError(f"{path / 'prompt.toml'}: not valid TOML ({exc})") from exc

    def read(fname: str) -> str:
        p = path / fname
        if not p.is_file():
            problems.append(f"{fname}: missing")
            return ""
        return p.read_text(encoding="utf-8")

    system, user, raw_tools = read("system.md"), read("user.md"), read("tools.json")
    tools: list[dict[str, Any]] = []
    if raw_tools:
        try:
            tools = json.loads(raw_tools)
        except json.JSONDecodeError as exc:
            problems.append(f"tools.json: not valid JSON ({exc})")
        if not isinstance(tools, list) or not any(
            isinstance(t, dict) and t.get("name") == SUBMIT_TOOL and isinstance(t.get("input_schema"), dict)
            for t in tools
        ):
            problems.append(f"tools.json: must define {SUBMIT_TOOL} with an input_schema")
            tools = []
    limits_raw = dict(meta.get("limits", {}))
    extra = {k: limits_raw.pop(k) for k in ("max_tool_errors", "max_tokens") if k in limits_raw}
    limit_names = {f.name for f in fields(ContextLimits)}
    unknown = sorted(set(limits_raw) - limit_names)
    if unknown:
        problems.append(f"prompt.toml: [limits]: unknown keys {', '.join(unknown)}")
    if problems:
        raise PromptError(f"reviewer prompt version {name} ({path}): " + "; ".join(problems))
    return ReviewerPrompt(
        name=name,
        path=path,
        description=str(meta.get("description", "")),
        system=system,
        user=user,
        tools=tools,
        limits=ContextLimits(**{k: int(v) for k, v in limits_raw.items()}),
        max_tool_errors=int(extra.get("max_tool_errors", 2)),
        max_tokens=int(extra.get("max_tokens", 2048)),
    )
