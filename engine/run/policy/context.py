"""What the policy is shown: the observation each step, and a history that fits the context window.

Both are places where harness brittleness is born (DESIGN.md): a policy that fails because its output was
cut, or because its early turns fell out of context, failed for a harness reason. So nothing is cut
silently: the text carries an explicit "[… N bytes cut]" note the policy can read, and every cut is
returned as a record that goes onto the step for the curator.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.plural import counted

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts" / "policy"
#: Characters per token when the server has not told us better (a conservative figure for code and
#: terminal text with BPE tokenizers; it errs towards trimming early rather than overflowing).
DEFAULT_CHARS_PER_TOKEN = 3.5
#: Per-message overhead of chat templates (role markers, separators), in tokens.
MESSAGE_OVERHEAD_TOKENS = 8
#: Tokens left unused below the context window: the estimate is an estimate.
SAFETY_MARGIN_TOKENS = 64


class ContextOverflow(RuntimeError):
    """The prompt cannot fit even with all trimmable history dropped: ``agent_error:context_overflow``."""

    def __init__(self, detail: str, cut: dict[str, Any]) -> None:
        self.detail = detail
        self.cut = cut
        super().__init__(detail)


def cut_note(n: int) -> str:
    return f"[… {n} bytes cut]"


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", errors="replace")


def cut_middle(text: str, budget: int) -> tuple[str, int]:
    """Keeps the head and the tail of ``text`` within ``budget`` bytes (note included); returns the text
    and the number of bytes cut. The tail matters most (errors, the prompt), the head shows what ran."""
    raw = _utf8(text)
    if len(raw) <= budget:
        return text, 0
    note_len = len(_utf8(cut_note(len(raw)))) + 2
    keep = max(0, budget - note_len)
    head_n = keep // 3
    tail_n = keep - head_n
    head = raw[:head_n].decode("utf-8", errors="ignore")
    tail = raw[len(raw) - tail_n :].decode("utf-8", errors="ignore") if tail_n else ""
    cut = len(raw) - len(_utf8(head)) - len(_utf8(tail))
    return f"{head}\n{cut_note(cut)}\n{tail}", cut


def cut_head(text: str, budget: int) -> tuple[str, int]:
    """Keeps the last ``budget`` bytes (note included): for a screen, whose bottom rows are the present."""
    raw = _utf8(text)
    if len(raw) <= budget:
        return text, 0
    note_len = len(_utf8(cut_note(len(raw)))) + 1
    keep = max(0, budget - note_len)
    tail = raw[len(raw) - keep :].decode("utf-8", errors="ignore") if keep else ""
    cut = len(raw) - len(_utf8(tail))
    return f"{cut_note(cut)}\n{tail}", cut


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def plain_output(raw: str) -> str:
    """Raw pty output as a person would read it: colour and cursor codes dropped, and each carriage
    return overwriting its line (a progress bar leaves its last state, not every frame)."""
    text = _ANSI.sub("", raw).replace("\r\n", "\n")
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


@dataclass
class Observation:
    text: str
    cuts: list[dict[str, Any]]


def build_observation(screen: str, new_output: str, budget: int) -> Observation:
    """The terminal state for one step within ``budget`` bytes: the screen first (what the curator sees
    in the pane), then as much of the output since the last action as still fits."""
    screen = screen.rstrip("\n")
    new_output = plain_output(new_output)
    cuts: list[dict[str, Any]] = []
    screen_head = "Terminal screen:\n"
    output_head = "\n\nNew output since your last commands:\n"
    screen_budget = max(0, budget - len(_utf8(screen_head)))
    screen_text, n = cut_head(screen, screen_budget)
    if n:
        cuts.append({"kind": "observation", "part": "screen", "bytes_cut": n, "budget": budget})
    text = screen_head + screen_text
    if new_output:
        room = budget - len(_utf8(text)) - len(_utf8(output_head))
        out_bytes = len(_utf8(new_output))
        if room < 64:  # too little room for a useful fragment: drop it whole, but say so
            cuts.append({"kind": "observation", "part": "output", "bytes_cut": out_bytes, "budget": budget})
            text += "\n\n" + cut_note(out_bytes) + " (new output omitted)"
        else:
            out_text, n = cut_middle(new_output, room)
            if n:
                cuts.append({"kind": "observation", "part": "output", "bytes_cut": n, "budget": budget})
            text += output_head + out_text
    return Observation(text=text, cuts=cuts)


def estimate_tokens(messages: list[dict[str, str]], chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> int:
    return sum(int(len(m.get("content", "")) / chars_per_token) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def trim_history(
    messages: list[dict[str, str]],
    *,
    context_window: int,
    max_tokens: int,
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """Fits ``messages`` (system, first user message, then assistant/user turns) into the window minus the
    completion's ``max_tokens``. Keeps the system prompt and the first user message (the task), drops the
    oldest turns in assistant+user pairs so roles keep alternating, and tells the policy in the first user
    message how many turns it no longer sees. Raises ``ContextOverflow`` when even the minimum is too big.
    """
    budget = context_window - max_tokens - SAFETY_MARGIN_TOKENS
    before = estimate_tokens(messages, chars_per_token)
    if before <= budget:
        return messages, []
    head, turns = messages[:2], messages[2:]
    # The last turn (the policy's last reply and the observation now asked about) is never dropped.
    dropped = 0
    while len(turns) > 2:
        turns = turns[2:]
        dropped += 2
        note = f"\n\n[… {counted(dropped // 2, 'earlier turn')} cut to fit the context window]"
        first = {**head[1], "content": head[1]["content"] + note} if len(head) > 1 else None
        trimmed = [head[0], first, *turns] if first is not None else [*head, *turns]
        after = estimate_tokens(trimmed, chars_per_token)
        if after <= budget:
            cut = {
                "kind": "history",
                "messages_dropped": dropped,
                "tokens_before": before,
                "tokens_after": after,
                "budget": budget,
            }
            return trimmed, [cut]
    cut = {
        "kind": "context_overflow",
        "tokens": estimate_tokens([*head, *turns], chars_per_token),
        "budget": budget,
    }
    raise ContextOverflow(
        f"prompt needs ~{cut['tokens']} tokens with all older turns dropped; the window leaves {budget} "
        f"(context_window {context_window} - max_tokens {max_tokens} - margin {SAFETY_MARGIN_TOKENS})",
        cut,
    )


# --- prompt files --- #


class PromptTemplates:
    """A versioned prompt set (``engine/prompts/policy/<version>/*.md``): prompts are files, so a result
    can name the exact prompt it came from and a prompt change is a diff, not a code change."""

    def __init__(self, version: str, root: Path = PROMPTS_DIR) -> None:
        self.version = version
        self.dir = root / version
        if not self.dir.is_dir():
            known = (
                ", ".join(sorted(p.name for p in root.iterdir() if p.is_dir())) if root.is_dir() else "none"
            )
            raise FileNotFoundError(f"no prompt version {version!r} in {root} (known: {known})")
        self._cache: dict[str, str] = {}

    def raw(self, name: str) -> str:
        if name not in self._cache:
            self._cache[name] = (self.dir / f"{name}.md").read_text(encoding="utf-8")
        return self._cache[name]

    def render(self, name: str, **values: Any) -> str:
        """``{{name}}`` placeholders only, so JSON examples' braces in the prompt need no escaping."""
        text = self.raw(name)
        for key, value in values.items():
            text = text.replace("{{" + key + "}}", value if isinstance(value, str) else json.dumps(value))
        return text.strip() + "\n"
