"""A command-palette provider listing the active screen's own key bindings.

Why: every action a curator can reach by key must also be findable by name (ctrl+p, "seek", "tag"...),
and keeping a second list of commands next to BINDINGS would drift. Screens add
``COMMANDS = {ScreenBindingsProvider}`` and their bindings' descriptions become palette entries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider


class ScreenBindingsProvider(Provider):
    def _entries(self) -> list[tuple[str, str, str]]:
        seen: set[str] = set()
        out = []
        for b in self.screen.BINDINGS:
            if not isinstance(b, Binding) or not b.description or b.action in seen:
                continue
            seen.add(b.action)
            first = Binding(b.key.split(",")[0], b.action, b.description, key_display=b.key_display)
            out.append((b.description, b.action, self.app.get_key_display(first)))
        return out

    def _run(self, action: str) -> None:
        self.screen.call_later(self.screen.run_action, action)

    async def discover(self) -> Hits:
        for desc, action, key in self._entries():
            yield DiscoveryHit(desc, partial(self._run, action), help=f"key: {key}")

    async def search(self, query: str) -> AsyncIterator[Hit]:  # type: ignore[override]
        matcher = self.matcher(query)
        for desc, action, key in self._entries():
            score = matcher.match(desc)
            if score > 0:
                yield Hit(score, matcher.highlight(desc), partial(self._run, action), help=f"key: {key}")
