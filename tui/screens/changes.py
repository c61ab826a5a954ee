"""Changes screen: what the policy left in its container, against the image, with the guard's findings.

Why: a reward is only as good as the state it was computed on. After a surprising pass (or a
``verifier_tamper``) the curator's question is "what did the policy actually change?": every file added,
modified or deleted, a text diff of the modified ones, and the tamper-guard findings in red (allowed ones
in yellow, with the rule that matched). Data comes from :func:`engine.app.changes.episode_changes`; the
diff needs the image's copy of the file, read in a thread so the table stays responsive.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from ...engine.app.changes import change_diff, episode_changes
from ...engine.core.errors import BandpassError
from ...engine.core.plural import counted
from ...engine.core.workspace import Workspace
from ..errors import Guarded
from ..navigation import go_back

MARK = {"added": "A", "modified": "M", "deleted": "D"}


def _size(n: int | None) -> str:
    if n is None:
        return ""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


class ChangesScreen(Guarded, Screen[None]):
    CSS_PATH = "changes.tcss"
    BINDINGS = [
        Binding("f", "toggle_flagged", "Flagged only"),
        Binding("h", "toggle_dirs", "Show dirs", show=False),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, ws: Workspace, episode_id: int) -> None:
        super().__init__()
        self.ws = ws
        self.episode_id = episode_id
        self.info: dict[str, Any] = {}
        self.flagged_only = False
        self.show_dirs = False
        self.rows: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="changes-summary")
        with Horizontal(id="changes-main"):
            yield DataTable(id="changes-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="changes-diff-scroll"):
                yield Static("", id="changes-diff", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = f"episode {self.episode_id} · changes"
        table = self.query_one(DataTable)
        table.add_columns("", "path", "size", "guard")
        try:
            self.info = episode_changes(self.ws, self.episode_id)
        except KeyError as exc:
            self.query_one("#changes-summary", Static).update(str(exc).strip("'"))
            return
        self._fill()

    # --- data --- #

    def findings_for(self, path: str) -> list[dict[str, Any]]:
        return [f for f in self.info.get("guard", {}).get("findings", []) if f["path"] == path]

    def _fill(self) -> None:
        info = self.info
        summary = self.query_one("#changes-summary", Static)
        if not info.get("captured"):
            why = info.get("outcome") or "unfinished"
            summary.update(Text(f"no end state captured for episode {self.episode_id} ({why})"))
            return
        findings = info["guard"]["findings"]
        tripped = [f for f in findings if not f["allowed"]]
        head = Text()
        gate = info["guard"].get("gate", True)
        if tripped and gate:
            head.append(f"guard TRIPPED: {counted(len(tripped), 'finding')}", style="bold red")
        elif tripped:  # verified in a clean room: what the policy touched, not what it was judged by
            room = "service verifier" if info.get("verify_mode") == "service" else "clean room"
            head.append(
                f"{room} · guard: {counted(len(tripped), 'finding')}, evidence only", style="bold yellow"
            )
        else:
            head.append("guard clean", style="bold green")
            if findings:
                head.append(f" ({len(findings)} allowed by the task)", style="yellow")
        head.append(
            f" · {counted(len(info['changes']), 'change')} · {_size(info['archived_bytes'])} archived"
            f" (cap {_size(info['cap_bytes'])}, {info['over_cap']} over) · outcome {info['outcome']}"
        )
        summary.update(head)
        table = self.query_one(DataTable)
        table.clear()
        self.rows = []
        for c in info["changes"]:
            hits = self.findings_for(c["path"])
            if c["type"] == "dir" and not self.show_dirs and not hits:
                continue
            if self.flagged_only and not hits:
                continue
            # red only where the guard was the gate (in place); in the clean room a finding is evidence
            tripped_here = any(not f["allowed"] for f in hits) and info["guard"].get("gate", True)
            style = "bold red" if tripped_here else ("yellow" if hits else "")
            guard = ", ".join(f"{f['rule']}{' (allowed)' if f['allowed'] else ''}" for f in hits)
            size = _size(c.get("size"))
            if c["kind"] != "deleted" and c["type"] == "file" and not c["archived"]:
                size += " (not archived)"
            table.add_row(
                Text(MARK[c["kind"]], style=style),
                Text(c["path"] + ("/" if c["type"] == "dir" else ""), style=style),
                size,
                Text(guard, style=style),
            )
            self.rows.append(c)
        if self.rows:
            self._show(0)
        else:
            self.query_one("#changes-diff", Static).update("nothing to show")

    # --- diff pane --- #

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    def _show(self, row: int) -> None:
        if not 0 <= row < len(self.rows):
            return
        c = self.rows[row]
        lines = [f"{MARK[c['kind']]} {c['path']}  {c['type']}  {_size(c.get('size'))}".rstrip()]
        if c.get("sha256"):
            lines.append(f"sha256 {c['sha256']}")
        if c.get("link"):
            lines.append(f"-> {c['link']}")
        for f in self.findings_for(c["path"]):
            gate = (self.info.get("guard") or {}).get("gate", True)
            state = "allowed by the task" if f["allowed"] else ("TAMPER" if gate else "flagged (evidence)")
            lines.append(f"{state}: {f['rule']}: {f['why']}")
        self.query_one("#changes-diff", Static).update("\n".join(lines))
        if c["type"] == "file" or c["kind"] == "deleted":
            self._load_diff(c["path"], "\n".join(lines))

    @work(thread=True, exclusive=True, group="diff")
    def _load_diff(self, path: str, head: str) -> None:
        from docker.errors import DockerException

        try:
            text = change_diff(self.ws, self.episode_id, path)
        except (BandpassError, DockerException, OSError) as exc:  # e.g. no Docker engine, image gone
            text = f"diff unavailable: {exc}"
        self.app.call_from_thread(self._set_diff, head + "\n\n" + text)

    def _set_diff(self, text: str) -> None:
        self.query_one("#changes-diff", Static).update(text)

    # --- actions --- #

    def action_toggle_flagged(self) -> None:
        self.flagged_only = not self.flagged_only
        self._fill()

    def action_toggle_dirs(self) -> None:
        self.show_dirs = not self.show_dirs
        self._fill()

    def action_back(self) -> None:
        go_back(self)
