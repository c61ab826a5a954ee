"""Settings screen: the workspace's ``bandpass.toml`` — policy models and endpoints, the generator, image
aliases and band defaults — as tables, with the file itself editable beside them.

Why an editor over the file rather than a form per field: the file is the source of truth the CLI reads
too, and ``engine.core.config`` already reports every problem as ``[section].key: expected …``. The editor
validates as you type with that same parser and refuses to save a file the engine would reject, so the
TUI can never write a config that breaks ``bandpass run``. "Check endpoints" asks each model's server for
``/models`` in a worker, so a wrong URL shows up here rather than as a batch of infra errors.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Header, Static, TextArea

from ...engine.core.config import (
    BandConfig,
    Config,
    ConfigError,
    GeneratorConfig,
    PolicyModelConfig,
    load_config,
)
from ...engine.core.workspace import Workspace
from ..errors import Guarded

#: What a new bandpass.toml starts as; its values are the engine's own defaults.
TEMPLATE = """\
# Bandpass workspace settings. Every key is optional.

# [models.qwen-9b]
# base_url = "http://127.0.0.1:8000/v1"
# served_name = "Qwen/Qwen3.5-9B"
# temperature = 0.7
# max_tokens = 2048
# context_window = 32768   # optional: default is the served max_model_len

# [generator]
# model = "{generator.model}"

# [images.aliases]
# "python:3.12-slim" = "bandpass/base:bookworm"

[band]
lo = {band.lo}
hi = {band.hi}
k = {band.k}
min_samples = {band.min_samples}
confidence = {band.confidence}
""".format(band=BandConfig(), generator=GeneratorConfig())


def parse_config_text(text: str) -> Config:
    """Validates ``text`` with the engine's own parser (it reads files, so go through a temp file)."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "bandpass.toml"
        p.write_text(text, encoding="utf-8")
        return load_config(p)


class SettingsScreen(Guarded, Screen[None]):
    CSS_PATH = "settings.tcss"
    AUTO_FOCUS = "#settings-models"
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", priority=True),
        Binding("ctrl+r", "reload_checked", "Reload from disk"),
        Binding("ctrl+e", "check_endpoints", "Check endpoints"),
        Binding("q,ctrl+q", "quit_checked", "Quit", show=False),
    ]

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace
        self._valid: Config | None = None
        self._saved_text: str | None = None  # the text as loaded or last saved: unsaved edits differ

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="settings-main"):
            with VerticalScroll(id="settings-tables"):
                yield Static("[b]Policy models and endpoints[/b]", classes="settings-h")
                yield DataTable(id="settings-models", cursor_type="row", show_cursor=False)
                yield Static("", id="settings-endpoints")
                yield Static("[b]Generator[/b]", classes="settings-h")
                yield Static("", id="settings-generator")
                yield Static("[b]Image aliases[/b]", classes="settings-h")
                yield DataTable(id="settings-aliases", show_cursor=False)
                yield Static("[b]Band defaults[/b]", classes="settings-h")
                yield Static("", id="settings-band")
            with Vertical(id="settings-editor"):
                yield Static("", id="settings-path")
                yield TextArea("", language="toml", id="settings-text", show_line_numbers=True)
                yield Static("", id="settings-problems")
                with Horizontal(id="settings-buttons"):
                    yield Button("Save", id="settings-save", variant="primary")
                    yield Button("Reload", id="settings-reload")
                    yield Button("Check endpoints", id="settings-check")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#settings-models", DataTable).add_columns(
            "name", "base_url", "served_name", "temp", "max_tokens", "context", "key env"
        )
        self.query_one("#settings-aliases", DataTable).add_columns("FROM as written", "local image used")
        self.action_reload()

    def action_reload(self) -> None:
        path = self.workspace.config_path
        try:
            text = path.read_text(encoding="utf-8") if path.exists() else TEMPLATE
        except OSError as exc:
            self.notify(f"{exc}", title="Cannot read bandpass.toml", severity="error")
            text = TEMPLATE
        where = "bandpass.toml" if path.exists() else "bandpass.toml (not created yet: template)"
        self.query_one("#settings-path", Static).update(f"[b]{escape(where)}[/b] in the workspace")
        self.query_one("#settings-text", TextArea).load_text(text)
        self._saved_text = text
        self._validate(text)

    @on(TextArea.Changed, "#settings-text")
    def _changed(self, event: TextArea.Changed) -> None:
        self._validate(event.text_area.text)

    def _validate(self, text: str) -> None:
        problems = self.query_one("#settings-problems", Static)
        try:
            cfg = parse_config_text(text)
        except ConfigError as exc:
            self._valid = None
            problems.update(
                "[b red]Not saved until fixed:[/b red]\n"
                + "\n".join(f"  • {escape(p)}" for p in exc.problems)
            )
            problems.add_class("-error")
            return
        self._valid = cfg
        problems.update("[green]valid[/green]")
        problems.remove_class("-error")
        self._show(cfg)

    def _show(self, cfg: Config) -> None:
        models = self.query_one("#settings-models", DataTable)
        models.clear()
        for m in cfg.models.values():
            models.add_row(
                m.name,
                m.base_url,
                m.served_name,
                f"{m.temperature:g}",
                str(m.max_tokens),
                str(m.context_window or "served"),
                m.api_key_env,
                key=m.name,
            )
        if not cfg.models:
            models.add_row("(none: add a [models.NAME] table)", "", "", "", "", "", "")
        g = cfg.generator
        key_set = "set" if os.environ.get(g.api_key_env) else "[red]not set[/red]"
        self.query_one("#settings-generator", Static).update(
            f"model {escape(g.model)} · key ${escape(g.api_key_env)} {key_set}"
            + (f" · {escape(g.base_url)}" if g.base_url else "")
        )
        aliases = self.query_one("#settings-aliases", DataTable)
        aliases.clear()
        for a, b in sorted(cfg.image_aliases.items()):
            aliases.add_row(a, b)
        band = cfg.band
        self.query_one("#settings-band", Static).update(
            f"keep tasks decided (at {band.confidence:.0%} confidence) to have pass@{band.k} in "
            f"[{band.lo:g}, {band.hi:g}], with n ≥ {band.min_samples}"
        )

    @on(Button.Pressed, "#settings-save")
    def action_save(self) -> None:
        text = self.query_one("#settings-text", TextArea).text
        if self._valid is None:
            self.notify(
                "Fix the problems listed under the editor first.", title="Not saved", severity="error"
            )
            return
        try:
            tmp = self.workspace.config_path.with_suffix(".toml.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(self.workspace.config_path)  # atomic: a crash never leaves half a config
        except OSError as exc:
            self.notify(str(exc), title="Could not save", severity="error")
            return
        self.workspace._config = None  # next read picks up the new file
        self._saved_text = text
        self.notify("bandpass.toml saved.", title="Settings")

    @on(Button.Pressed, "#settings-reload")
    def _reload_pressed(self) -> None:
        self.action_reload_checked()

    @property
    def dirty(self) -> bool:
        """The editor holds edits that are not in bandpass.toml."""
        return (
            self._saved_text is not None
            and self.query_one("#settings-text", TextArea).text != self._saved_text
        )

    def _ask_then(self, question: str, then: Callable[[], None]) -> None:
        from .confirm import ConfirmDialog

        if not self.dirty:
            then()
            return
        self.app.push_screen(ConfirmDialog(question), lambda yes: then() if yes else None)

    def action_quit_checked(self) -> None:
        """Quitting with unsaved edits asks first (they would be lost without a word)."""
        self._ask_then("bandpass.toml has unsaved edits. Quit and discard them?", self.app.exit)

    def action_reload_checked(self) -> None:
        self._ask_then("Reloading drops your unsaved edits to bandpass.toml. Reload?", self.action_reload)

    @on(Button.Pressed, "#settings-check")
    def action_check_endpoints(self) -> None:
        if self._valid is None or not self._valid.models:
            self.notify("No valid models to check.", severity="warning")
            return
        self.query_one("#settings-endpoints", Static).update("checking endpoints…")
        self._check(list(self._valid.models.values()))

    @work(thread=True, exclusive=True, group="settings-check")
    def _check(self, models: list[PolicyModelConfig]) -> None:
        import httpx

        lines = []
        for m in models:
            url = m.base_url.rstrip("/") + "/models"
            try:
                r = httpx.get(
                    url, timeout=3.0, headers={"Authorization": f"Bearer {os.environ.get(m.api_key_env, '')}"}
                )
                served = [d.get("id") for d in r.json().get("data", [])] if r.status_code == 200 else []
                ok = m.served_name in served
                mark = (
                    "[green]ok[/green]"
                    if ok
                    else f"[yellow]HTTP {r.status_code}, serves {served[:3]}[/yellow]"
                )
            except (httpx.HTTPError, ValueError, AttributeError) as exc:  # an endpoint not ours: any answer
                mark = f"[red]{escape(type(exc).__name__)}: {escape(str(exc))[:80]}[/red]"
            lines.append(f"  {escape(m.name)} → {escape(url)}: {mark}")
        self.app.call_from_thread(self.query_one("#settings-endpoints", Static).update, "\n".join(lines))
