"""The action protocol (Terminus-2 convention): the policy answers one JSON object per step.

``{"analysis": str, "plan": str, "commands": [{"keystrokes": str, "duration": float}],
"task_complete": bool}``

Parsing is lenient where leniency loses nothing (prose or code fences around the object, missing
analysis/plan, out-of-range durations are clamped) and strict where a guess would change what runs in
the terminal (a duration that is not a number, keystrokes that are not a string). Every rejection names
the exact field, because the message is sent back to the policy to correct itself and stored as harness
evidence for the curator: "unparsable" alone helps neither.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

MIN_DURATION = 0.1
MAX_DURATION = 120.0
DEFAULT_DURATION = 1.0

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[^\n]*\n(.*?)```", re.DOTALL)
_ACTION_KEYS = {"analysis", "plan", "commands", "task_complete", "is_task_complete"}


class ActionParseError(ValueError):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


@dataclass
class Command:
    keystrokes: str
    duration: float = DEFAULT_DURATION


@dataclass
class Action:
    analysis: str = ""
    plan: str = ""
    commands: list[Command] = field(default_factory=list)
    task_complete: bool = False
    notes: list[str] = field(default_factory=list)  # clamps and tolerated deviations, kept as evidence

    def as_dict(self) -> dict[str, Any]:
        return {
            "analysis": self.analysis,
            "plan": self.plan,
            "commands": [{"keystrokes": c.keystrokes, "duration": c.duration} for c in self.commands],
            "task_complete": self.task_complete,
            "notes": list(self.notes),
        }


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the ``}`` closing the ``{`` at ``start``, skipping braces inside JSON strings."""
    depth = 0
    in_str = False
    esc = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _find_object(text: str) -> tuple[dict[str, Any], list[str]]:
    """The action object in ``text``: a fenced block first, else the first balanced object in the prose."""
    notes: list[str] = []
    first_error: str | None = None
    unclosed = False
    candidates: list[tuple[str, bool]] = []  # (text, whole-block)
    for m in _FENCE.finditer(text):
        if m.group(1).lower() in ("", "json", "jsonc", "json5"):
            candidates.append((m.group(2), True))
    candidates.append((text, False))
    fallback: dict[str, Any] | None = None
    for chunk, fenced in candidates:
        pos = chunk.find("{")
        while pos != -1:
            end = _balanced_end(chunk, pos)
            if end is None:
                unclosed = True
                break
            try:
                obj = _loads(chunk[pos:end])
            except (json.JSONDecodeError, ValueError) as e:
                if first_error is None:
                    first_error = _describe_decode_error(e)
                pos = chunk.find("{", end)
                continue
            if isinstance(obj, dict):
                if _ACTION_KEYS & obj.keys():
                    outside = (
                        (chunk[:pos] + chunk[end:]).strip() if fenced else (text[:pos] + text[end:]).strip()
                    )
                    if fenced or outside:
                        notes.append("text outside the JSON object was ignored")
                    return obj, notes
                if fallback is None:
                    fallback = obj
            pos = chunk.find("{", end)
    if fallback is not None:
        return fallback, notes
    if first_error is not None:
        raise ActionParseError(f"invalid JSON: {first_error}")
    if unclosed:
        raise ActionParseError("the JSON object is never closed (reply cut short?)")
    stripped = text.strip()
    if stripped.startswith("["):
        raise ActionParseError("expected a JSON object {...}, got a JSON array")
    raise ActionParseError("no JSON object found")


def _describe_decode_error(e: Exception) -> str:
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg} at line {e.lineno} column {e.colno}"
    return str(e)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_action(text: str) -> Action:
    """Parses one policy reply; raises ``ActionParseError`` with a message fit to send back to the policy."""
    if not text or not text.strip():
        raise ActionParseError("empty reply")
    obj, notes = _find_object(text)
    action = Action(notes=notes)
    for key in ("analysis", "plan"):
        value = obj.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ActionParseError(f"{key}: expected a string, got {_short(value)}")
        setattr(action, key, value)
    complete_key = "task_complete" if "task_complete" in obj else "is_task_complete"
    complete = obj.get(complete_key, False)
    if complete is None:
        complete = False
    if isinstance(complete, str) and complete.strip().lower() in ("true", "false"):
        action.notes.append(f"{complete_key}: string {complete!r} read as a boolean")
        complete = complete.strip().lower() == "true"
    if not isinstance(complete, bool):
        raise ActionParseError(f"{complete_key}: expected true or false, got {_short(complete)}")
    action.task_complete = complete
    if "commands" not in obj:
        if not complete:
            raise ActionParseError(
                'missing "commands": a list of {"keystrokes": str, "duration": number} (may be empty)'
            )
        commands: Any = []
    else:
        commands = obj["commands"]
    if commands is None:
        commands = []
    if not isinstance(commands, list):
        raise ActionParseError(f"commands: expected a list, got {_short(commands)}")
    for i, cmd in enumerate(commands):
        where = f"commands[{i}]"
        if not isinstance(cmd, dict):
            raise ActionParseError(
                f'{where}: expected an object {{"keystrokes": ..., "duration": ...}}, got {_short(cmd)}'
            )
        if "keystrokes" not in cmd:
            raise ActionParseError(f'{where}: missing "keystrokes"')
        keys = cmd["keystrokes"]
        if not isinstance(keys, str):
            raise ActionParseError(f"{where}.keystrokes: expected a string, got {_short(keys)}")
        duration = cmd.get("duration", DEFAULT_DURATION)
        if duration is None:
            duration = DEFAULT_DURATION
        if not _is_number(duration):
            raise ActionParseError(f"{where}.duration: expected a number, got {_short(duration)}")
        duration = float(duration)
        if not math.isfinite(duration):
            raise ActionParseError(f"{where}.duration: expected a finite number, got {duration}")
        clamped = min(MAX_DURATION, max(MIN_DURATION, duration))
        if clamped != duration:
            action.notes.append(f"{where}.duration {duration:g} clamped to {clamped:g}")
        action.commands.append(Command(keystrokes=keys, duration=clamped))
    return action
