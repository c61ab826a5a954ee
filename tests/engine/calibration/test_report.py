"""The calibration report: numbers, the loud infra warning, the CLI (`bandpass report`) and the TUI screen."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from rich.console import Console
from textual.app import App
from textual.widgets import DataTable, Select, Static
from typer.testing import CliRunner, Result

import bandpass.tui.commands.export  # noqa: F401 - registers `report` and `export` on tui.cli.app
from bandpass.engine.calibration.calibrate import GateParams
from bandpass.engine.calibration.report import build_report, render_report
from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import Generation
from bandpass.tui.cli import app
from bandpass.tui.screens.calibration import CalibrationScreen
from tests.support.calib_data import add_episodes, add_task, outcomes

M = "qwen-9b"


def _text(renderable: object) -> str:
    console = Console(record=True, width=140, color_system=None)
    console.print(renderable)
    return console.export_text()


@pytest.fixture
def infra_ws(workspace: Workspace) -> Workspace:
    """The field's worst case: 146 of 151 episodes infra errors."""
    vid, _ = add_task(workspace, "broken-env")
    add_episodes(workspace, vid, M, outcomes(2, 3, infra_error__container_died=140, infra_error__oom=6))
    return workspace


@pytest.fixture
def mixed_ws(workspace: Workspace) -> Workspace:
    ws = workspace
    specs = {
        "easy": outcomes(30, 0),  # decided above
        "mid": outcomes(20, 45, agent_error__turn_limit=1),  # decided in
        "hard": outcomes(0, 150, agent_error__parse_error=1),  # decided below
        "lo-edge": outcomes(1, 19),  # pass@2 exactly 0.1, but 20 samples cannot tell which side
        "thin": outcomes(1, 1),
    }
    for name, outs in specs.items():
        vid, _ = add_task(ws, name)
        ids = add_episodes(ws, vid, M, outs)
        if name == "hard":
            with session(ws.engine) as s:
                q.add_tag(s, ids[0], "invalidity", "underspecified_instruction", blocking=True)
                q.add_tag(s, ids[1], "harness", "turn_limit", blocking=False)
    vid, _ = add_task(ws, "flaky-infra")
    add_episodes(ws, vid, M, outcomes(2, 2, infra_error__rate_limited=1))
    with session(ws.engine) as s:
        for pv, outcome in [("v1", "accepted"), ("v1", "rejected"), ("v1", "rejected"), ("v1", "error")]:
            s.add(Generation(prompt_version=pv, model="claude", outcome=outcome))
        for pv, outcome in [("v2", "accepted"), ("v2", "accepted"), ("v2", "rejected"), ("v2", "running")]:
            s.add(Generation(prompt_version=pv, model="claude", outcome=outcome))
    return ws


def test_infra_heavy_report_warns_loudly(infra_ws: Workspace) -> None:
    rep = build_report(infra_ws, M, GateParams(k=2))
    assert (rep.episodes, rep.infra_errors) == (151, 146)
    assert rep.infra_warning
    (e,) = rep.estimates
    assert e.n == 5 and e.infra_heavy
    assert rep.mean_pass_at_k == pytest.approx(0.7)  # honest, over the 5 valid samples
    assert rep.mean_pass_at_k_if_infra_failed == pytest.approx(0.0265, abs=1e-4)  # the published mistake
    assert rep.infra_codes == {"container_died": 140, "oom": 6}
    text = _text(render_report(rep))
    assert "WARNING: pass@k NOT MEANINGFUL" in text
    assert "146 of 151 episodes" in text
    assert "2.6%" in text and "70.0%" in text
    assert text.index("WARNING") < text.index("mean pass@2")  # the warning comes first
    assert "broken-env (146/151)" in text


def _pass_at(n: int, c: int, k: int) -> float:
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def test_report_numbers(mixed_ws: Workspace) -> None:
    rep = build_report(mixed_ws, M, GateParams(lo=0.1, hi=0.9, k=2, min_samples=4))
    assert not rep.infra_warning
    assert rep.status == {
        "easy": "above",
        "mid": "in",
        "hard": "below",
        "lo-edge": "undecided",
        "thin": "undecided",
        "flaky-infra": "undecided",
    }
    assert rep.band_counts() == {"below": 1, "in": 1, "above": 1, "undecided": 3}
    assert rep.outcome_kinds == {
        "agent_error": 2,
        "failed": 217,
        "infra_error": 1,
        "passed": 54,
    }
    assert rep.agent_error_codes == {"parse_error": 1, "turn_limit": 1}
    assert rep.infra_codes == {"rate_limited": 1}
    assert rep.tags == {"harness.turn_limit": 1, "invalidity.underspecified_instruction": 1}
    # "running" is not an attempt yet and "error" (an API outage) says nothing about the prompt
    assert rep.generation == [("v1", 3, 1), ("v2", 3, 2)]
    # mean over measured tasks (thin excluded): the point estimates, whatever was decided
    expected = (1 + _pass_at(66, 20, 2) + 0 + 0.1 + (1 - 1 / 6)) / 5
    assert rep.mean_pass_at_k == pytest.approx(expected)
    assert rep.exportable == 1  # mid: the only task decided in the band (lo-edge is in by the point)
    assert rep.gates["lo-edge"] == ["band:undecided"]
    bins, unmeasured = rep.histogram()
    assert unmeasured == 1
    by_label = {b.label: b for b in bins}
    assert by_label["= 0"].count == 1 and by_label["= 1"].count == 1
    assert by_label["0.1–0.2"].count == 1  # lo-edge, exactly 0.1
    assert by_label["0.5–0.6"].count == 1 and by_label["0.8–0.9"].count == 1
    assert by_label["0.1–0.2"].overlap == "in" and by_label["= 0"].overlap == "out"
    assert by_label["0.9–1.0"].overlap == "partial"
    text = _text(render_report(rep))
    assert "WARNING" not in text
    assert "band lo 0.1" in text and "band hi 0.9" in text
    assert text.index("band lo 0.1") < text.index("0.1–0.2") < text.index("band hi 0.9") < text.index("= 1")
    assert "undecided 3" in text and "decided at 90% confidence" in text
    assert "v2" in text and "66.7%" in text  # yield of prompt v2
    d = json.loads(json.dumps(rep.as_dict()))
    assert d["band_counts"]["in"] == 1 and d["generation"][1]["yield"] == pytest.approx(2 / 3)
    mid = next(t for t in d["per_task"] if t["task"] == "mid")
    assert mid["decision"] == mid["band"] == "in" and mid["confidence"] == 0.9
    assert 0.1 <= mid["interval"][0] < mid["pass_at"]["2"] < mid["interval"][1] <= 0.9
    assert mid["edges"] == {"lo": "above", "hi": "below"}


# --- CLI ----------------------------------------------------------------------------------------------


def _cli(ws: Workspace, *args: str) -> Result:
    return CliRunner().invoke(app, ["--workspace", str(ws.root), *args])


def test_cli_report_shorthand_and_subcommand(mixed_ws: Workspace) -> None:
    a = _cli(mixed_ws, "report", "--model", M, "--json")
    assert a.exit_code == 0, a.output
    b = _cli(mixed_ws, "report", "calibration", "--model", M, "--json")
    assert b.exit_code == 0, b.output
    assert json.loads(a.stdout) == json.loads(b.stdout)
    assert json.loads(a.stdout)["band_counts"]["in"] == 1
    c = _cli(mixed_ws, "report", "--model", M, "--k", "1", "--band", "0.2:0.8")
    assert c.exit_code == 0, c.output
    assert "pass@1" in c.stdout and "band [0.2, 0.8]" in c.stdout


def test_cli_report_errors(mixed_ws: Workspace) -> None:
    r = _cli(mixed_ws, "report")
    assert r.exit_code == 1 and f"--model is required (models with episodes: {M})" in r.stderr
    r = _cli(mixed_ws, "report", "--model", "nobody")
    assert r.exit_code == 1 and "--model nobody: no finished episodes" in r.stderr
    r = _cli(mixed_ws, "report", "--model", M, "--band", "0.9:0.1")
    assert r.exit_code == 1
    assert "--band: expected LO:HI with 0 <= LO <= HI <= 1, got 0.9:0.1" in r.stderr


def test_cli_report_infra_warning(infra_ws: Workspace) -> None:
    r = _cli(infra_ws, "report", "--model", M)
    assert r.exit_code == 0, r.output
    assert "WARNING: pass@k NOT MEANINGFUL" in r.stdout


# --- TUI ----------------------------------------------------------------------------------------------


class _Host(App[None]):
    def __init__(self, ws: Workspace) -> None:
        super().__init__()
        self.ws = ws

    def on_mount(self) -> None:
        self.push_screen(CalibrationScreen(self.ws, model=M))


async def test_calibration_screen(mixed_ws: Workspace) -> None:
    vid, _ = add_task(mixed_ws, "other-only")
    add_episodes(mixed_ws, vid, "big-model", outcomes(30, 0))
    host = _Host(mixed_ws)
    async with host.run_test(size=(160, 60)) as pilot:
        await pilot.pause()
        screen = host.screen
        assert isinstance(screen, CalibrationScreen)
        table = screen.query_one("#calib-table", DataTable)
        assert table.row_count == 7
        rows = {table.get_row_at(i)[0]: table.get_row_at(i) for i in range(table.row_count)}
        assert rows["mid"][2:4] == ["66", "20"] and rows["mid"][8] == "in"
        assert rows["mid"][9] == "export" and rows["mid"][7] == "[0.28, 0.74]"  # the pass@2 interval
        assert rows["thin"][8] == "undecided" and rows["lo-edge"][9] == "band:undecided"
        assert screen.report is not None and screen.report.model == M
        assert not screen.query_one("#calib-warning", Static).display
        hist = _text(screen.query_one("#calib-histogram", Static).content)
        assert "band lo 0.1" in hist

        select = screen.query_one("#calib-model", Select)
        select.value = "big-model"
        await pilot.pause()
        assert screen.report is not None and screen.report.model == "big-model"
        rows = {table.get_row_at(i)[0]: table.get_row_at(i) for i in range(table.row_count)}
        assert rows["other-only"][8] == "above" and rows["mid"][2] == "0"
        await pilot.press("r")
        await pilot.pause()


async def test_calibration_screen_shows_infra_warning(infra_ws: Workspace) -> None:
    host = _Host(infra_ws)
    async with host.run_test(size=(160, 60)) as pilot:
        await pilot.pause()
        warning = host.screen.query_one("#calib-warning", Static)
        assert warning.display
        assert "146 of 151 episodes" in _text(warning.content)


def test_calibration_screen_stylesheet_ships() -> None:
    """The screen's .tcss sits next to it (package data), or the screen fails to mount when installed."""
    import bandpass.tui.screens.calibration as mod

    assert (Path(mod.__file__).parent / CalibrationScreen.CSS_PATH).is_file()
