"""Generator prompt versions: versioned files under ``engine/prompts/generator/<version>/``, never inline.

A prompt version is frozen once generations have used it: every Generation row records the version name,
so the yield report can compare versions only if a version's text never changes under it. Changing a
prompt means adding a folder. Each folder holds:

    prompt.toml     description, [context] knobs (examples, last_failure, too_easy), [difficulty] guidance
    system.md       the system prompt
    user.md         the first user message, with {{placeholders}}
    tools.json      the tool definitions (names, descriptions, input schemas) the model is offered
    too_easy.md     optional: section listing tasks the target model already solves ({{items}})
    examples.md     optional: section with accepted workspace tasks ({{items}})
    last_failure.md optional: section with the workspace's last rejected attempt ({{failure}})

Placeholders are ``{{name}}``; a placeholder with no value is an error (a silently empty seed axis would
skew a whole batch). Values a version does not use (v1-plain has no ``{{examples}}``) are simply unused.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..llm.templates import PromptError, render

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts" / "generator"
#: Tools the engine implements; a tools.json naming another tool is refused at load time.
KNOWN_TOOLS = frozenset({"write_file", "read_file", "list_files", "build", "run", "audit", "submit"})
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class ContextSettings:
    examples: int = 0
    last_failure: bool = False
    too_easy: int = 3
    example_chars: int = 6000


@dataclass(frozen=True)
class PromptVersion:
    name: str
    path: Path
    description: str
    system: str
    user: str
    tools: list[dict[str, Any]]
    context: ContextSettings
    difficulty_guidance: dict[str, str]
    sections: dict[str, str] = field(default_factory=dict)  # too_easy / examples / last_failure

    def render_user(self, values: dict[str, str]) -> str:
        return render(self.user, values, where=f"{self.name}/user.md")

    def render_section(self, section: str, values: dict[str, str]) -> str:
        """The optional section's text, or "" when the version has no such file."""
        template = self.sections.get(section)
        if template is None:
            return ""
        return render(template, values, where=f"{self.name}/{section}.md")


def available_versions(root: Path = PROMPTS_DIR) -> list[str]:
    """Folders that look like prompt versions (have a prompt.toml), sorted."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "prompt.toml").is_file())


def load_prompt(name: str, root: Path = PROMPTS_DIR) -> PromptVersion:
    if not _NAME.match(name):
        raise PromptError(f"prompt version {name!r}: expected a folder name like v2-context")
    path = root / name
    if not (path / "prompt.toml").is_file():
        known = ", ".join(available_versions(root)) or "none"
        raise PromptError(f"prompt version {name!r} not found in {root} (available: {known})")
    problems: list[str] = []
    try:
        meta = tomllib.loads((path / "prompt.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PromptError(f"{path / 'prompt.toml'}: not valid TOML ({exc})") from exc

    def text(fname: str, required: bool = True) -> str | None:
        p = path / fname
        if not p.is_file():
            if required:
                problems.append(f"{fname}: missing")
            return None
        return p.read_text(encoding="utf-8")

    system, user = text("system.md"), text("user.md")
    tools: list[dict[str, Any]] = []
    raw_tools = text("tools.json")
    if raw_tools is not None:
        try:
            tools = json.loads(raw_tools)
        except json.JSONDecodeError as exc:
            problems.append(f"tools.json: not valid JSON ({exc})")
        else:
            if not isinstance(tools, list) or not all(
                isinstance(t, dict)
                and isinstance(t.get("name"), str)
                and isinstance(t.get("input_schema"), dict)
                for t in tools
            ):
                problems.append("tools.json: expected a list of {name, description, input_schema}")
                tools = []
            unknown = sorted({t["name"] for t in tools} - KNOWN_TOOLS)
            if unknown:
                problems.append(f"tools.json: tools the engine does not implement: {', '.join(unknown)}")
            if tools and "submit" not in {t["name"] for t in tools}:
                problems.append("tools.json: a version must offer submit (nothing could ever be accepted)")
    ctx_raw = meta.get("context", {})
    if not isinstance(ctx_raw, dict):
        problems.append("prompt.toml: [context] must be a table")
        ctx_raw = {}
    try:
        context = ContextSettings(**ctx_raw)
    except TypeError as exc:
        problems.append(f"prompt.toml: [context]: {exc}")
        context = ContextSettings()
    guidance = meta.get("difficulty", {})
    if not isinstance(guidance, dict) or not all(isinstance(v, str) for v in guidance.values()):
        problems.append("prompt.toml: [difficulty] must map difficulty names to guidance strings")
        guidance = {}
    if problems:
        raise PromptError(f"prompt version {name} ({path}): " + "; ".join(problems))
    sections = {
        s: t for s in ("too_easy", "examples", "last_failure") if (t := text(f"{s}.md", required=False))
    }
    return PromptVersion(
        name=name,
        path=path,
        description=str(meta.get("description", "")),
        system=system or "",
        user=user or "",
        tools=tools,
        context=context,
        difficulty_guidance=dict(guidance),
        sections=sections,
    )
