"""Secret redaction for everything a generation stores or publishes.

The transcript is kept whole (it is the evidence for why a prompt version yields what it yields), so it
is also the place a key would leak: an SDK error quoting a header, a model echoing what it was sent, a
task file that embeds a token. The API key's exact value is removed, plus anything shaped like an
Anthropic/OpenAI key or a bearer token, plus the values of secret-looking environment variables.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

MASK = "[REDACTED]"
_PATTERNS = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-]{16,}"),
    re.compile(r"(?i)(x-api-key[\"']?\s*[:=]\s*[\"']?)([^\s\"',}]{8,})"),
]
_SECRET_ENV = re.compile(r"(?i)(api_?key|token|secret|password)")


class Redactor:
    def __init__(self, secrets: Iterable[str] = (), *, include_env: bool = True) -> None:
        values = {s for s in secrets if s and len(s) >= 6}
        if include_env:
            values |= {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8}
        # Longest first so a key that contains another secret is removed whole.
        self._values = sorted(values, key=len, reverse=True)

    def text(self, s: str) -> str:
        for v in self._values:
            if v in s:
                s = s.replace(v, MASK)
        for pat in _PATTERNS:
            # Two-group patterns keep their label ("x-api-key: ") and mask only the value.
            s = pat.sub(lambda m: m.group(1) + MASK, s) if pat.groups == 2 else pat.sub(MASK, s)
        return s

    def obj(self, value: Any) -> Any:
        """A deep copy of JSON-like data with every string (keys included) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.obj(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.obj(v) for v in value]
        return value
