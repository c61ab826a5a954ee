"""Calibration across models and checkpoints: `report --json` per_task and `report compare --models`."""

from __future__ import annotations

import json
import math

import pytest
from textual.app import App
from textual.coordinate import Coordinate
from textual.widgets import Select, Static, TabbedContent
from typer.testing import CliRunner, Result

import bandpass.tui.commands.report  # noqa: F401 - registers `report` on tui.cli.app
from bandpass.engine.calibration.compare import mcnemar_exact
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.cli import app
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.widgets.pass_heatmap import PassHeatmap
from tests.support.calib_data import add_episodes, add_task, outcomes

M = "qwen-9b"


def _cli(ws: Workspace, *args: str) -> Result:
    return CliRunner().invoke(app, ["--workspace", str(ws.root), *args])


def _pass_at(n: int, c: int, k: int) -> float:
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def test_report_json_per_task_follows_the_accounting(workspace: Workspace) -> None:
    ws = workspace
    mid, mid_hash = add_task(ws, "mid")
    add_episodes(ws, mid, M, outcomes(2, 3, agent_error__turn_limit=1, infra_error__oom=2))
    thin, _ = add_task(ws, "thin")
    add_episodes(ws, thin, M, outcomes(1, 1))
    add_task(ws, "untouched")
    r = _cli(ws, "report", "--model", M, "--k", "2", "--ks", "1,4", "--json")
    assert r.exit_code == 0, r.output
    rows = {row["task"]: row for row in json.loads(r.output)["per_task"]}
    assert list(rows) == ["mid", "thin", "untouched"]
    m = rows["mid"]
    # agent_error is a failed sample; infra errors are not samples but are counted beside n.
    assert (m["version_hash"], m["n"], m["c"], m["infra_errors"]) == (mid_hash, 6, 2, 2)
    assert m["infra_rate"] == pytest.approx(2 / 8)
    assert set(m["pass_at"]) == {"1", "2", "4"}
    assert m["pass_at"]["1"] == pytest.approx(2 / 6)
    assert m["pass_at"]["2"] == pytest.approx(_pass_at(6, 2, 2))  # 0.6
    assert m["pass_at"]["4"] == pytest.approx(_pass_at(6, 2, 4))
    assert m["reward_std"] == pytest.approx(math.sqrt(2 / 6 * 4 / 6))
    # pass@2 = 0.6 is inside [0.1, 0.9], but six samples cannot decide it: the band is a decision
    assert m["band"] == m["decision"] == "undecided" and m["confidence"] == 0.9
    assert m["interval"][0] < 0.1 < m["pass_at"]["2"] < 0.9 < m["interval"][1]
    assert m["edges"] == {"lo": None, "hi": None}
    t = rows["thin"]
    assert (t["n"], t["c"], t["pass_at"]["4"], t["band"]) == (2, 1, None, "undecided")  # k > n: null
    u = rows["untouched"]
    assert (u["n"], u["infra_rate"], u["pass_at"]["1"], u["reward_std"]) == (0, 0.0, None, None)
    bad = _cli(ws, "report", "--model", M, "--ks", "0,x", "--json")
    assert bad.exit_code != 0 and "--ks: expected a comma list of integers >= 1" in bad.output


@pytest.fixture
def series_ws(workspace: Workspace) -> Workspace:
    """Three checkpoints of one training run; tasks move through the band as the policy improves."""
    ws = workspace
    (ws.root / "bandpass.toml").write_text(
        "".join(
            f'[models.q-step{s}]\nserved_name = "q"\nseries = "grpo"\ncheckpoint_step = {s}\n'
            for s in (10, 20, 40)
        )
    )
    ws = Workspace.open(ws.root)
    data = {  # enough episodes to decide where it matters (the band is a decision at 90%)
        "a": {10: outcomes(20, 46), 20: outcomes(30, 0), 40: outcomes(30, 0)},
        "b": {10: outcomes(20, 46), 20: outcomes(0, 150), 40: outcomes(1, 1)},
        "c": {10: outcomes(0, 4), 20: outcomes(1, 3), 40: outcomes(infra_error__container_died=3)},
    }
    for name, per_step in data.items():
        vid, _ = add_task(ws, name)
        for step, outs in per_step.items():
            add_episodes(ws, vid, f"q-step{step}", outs)
    add_task(ws, "never-run")
    return ws


def test_compare_matrix_leavers_and_means_exactly(series_ws: Workspace) -> None:
    # Asked out of order: the series sorts by checkpoint_step.
    r = _cli(series_ws, "report", "compare", "--models", "q-step40,q-step10,q-step20", "--k", "2", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [m["model"] for m in d["models"]] == ["q-step10", "q-step20", "q-step40"]
    assert [m["checkpoint_step"] for m in d["models"]] == [10, 20, 40]
    matrix = {row["task"]: row["cells"] for row in d["matrix"]}
    assert list(matrix) == ["a", "b", "c"]  # a task nobody ran is not a row
    expect = {
        ("a", "q-step10"): (66, 20, _pass_at(66, 20, 2), "in"),
        ("a", "q-step20"): (30, 30, 1.0, "above"),
        ("a", "q-step40"): (30, 30, 1.0, "above"),
        ("b", "q-step10"): (66, 20, _pass_at(66, 20, 2), "in"),
        ("b", "q-step20"): (150, 0, 0.0, "below"),
        ("b", "q-step40"): (2, 1, 1.0, "undecided"),  # two samples decide nothing
        ("c", "q-step10"): (4, 0, 0.0, "undecided"),  # pass@2 = 0 over 4: not yet "below"
        ("c", "q-step20"): (4, 1, _pass_at(4, 1, 2), "undecided"),
        ("c", "q-step40"): (0, 0, None, "undecided"),  # infra errors only: no sample
    }
    for (task, model), (n, c, p, band) in expect.items():
        cell = matrix[task][model]
        assert (cell["n"], cell["c"], cell["band"]) == (n, c, band), (task, model)
        assert cell["pass_at_k"] == (None if p is None else pytest.approx(p)), (task, model)
        if band != "undecided":  # the decision's interval holds the point estimate
            assert cell["interval"][0] <= p <= cell["interval"][1]
    assert matrix["c"]["q-step40"]["infra_errors"] == 3
    assert d["left_band"] == [
        {
            "task": "a",
            "from": "q-step10",
            "to": "q-step20",
            "kind": "saturated",
            "pass_at_k_from": pytest.approx(_pass_at(66, 20, 2)),
            "pass_at_k_to": 1.0,
        },
        {
            "task": "b",
            "from": "q-step10",
            "to": "q-step20",
            "kind": "too_hard",
            "pass_at_k_from": pytest.approx(_pass_at(66, 20, 2)),
            "pass_at_k_to": 0.0,
        },
    ]
    # every change of decision is a move; only decided-to-decided ones are beyond noise
    moves = {(m["task"], m["from"]): (m["band_from"], m["band_to"], m["beyond_noise"]) for m in d["moves"]}
    assert moves == {
        ("a", "q-step10"): ("in", "above", True),
        ("b", "q-step10"): ("in", "below", True),
        ("b", "q-step20"): ("below", "undecided", False),
    }
    # exact McNemar over episodes paired in order per task: step 10 -> 20 pairs a's first 30 (10 fail->pass),
    # b's first 66 (20 pass->fail) and c's 4 (1 fail->pass): 11 against 20 is within noise
    p1020, p2040 = d["paired"]
    assert (p1020["from"], p1020["to"], p1020["tasks"], p1020["pairs"]) == ("q-step10", "q-step20", 3, 100)
    assert (p1020["improved"], p1020["regressed"]) == (11, 20)
    assert p1020["p_value"] == pytest.approx(mcnemar_exact(11, 20)) and p1020["verdict"] == "within noise"
    assert (p2040["tasks"], p2040["pairs"], p2040["improved"], p2040["regressed"]) == (2, 32, 1, 0)
    means = {m["model"]: m for m in d["models"]}
    assert means["q-step10"]["mean_pass_at_k"] == pytest.approx(2 * _pass_at(66, 20, 2) / 3)
    assert means["q-step20"]["mean_pass_at_k"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert means["q-step40"]["mean_pass_at_k"] == pytest.approx(1.0)
    assert d["common_tasks"] == 1  # only "a" is measured for all three
    assert means["q-step10"]["mean_pass_at_k_common"] == pytest.approx(_pass_at(66, 20, 2))
    assert means["q-step40"]["infra_rate"] == pytest.approx(3 / 35)
    # The single-model report says the same for every cell.
    single = json.loads(_cli(series_ws, "report", "--model", "q-step20", "--json").output)
    assert {row["task"]: row["band"] for row in single["per_task"]}["a"] == "above"


def test_mcnemar_exact() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024)  # all ten discordant pairs one way
    assert mcnemar_exact(1, 6) == pytest.approx(2 * (1 + 7) / 128)
    assert mcnemar_exact(6, 1) == mcnemar_exact(1, 6)


def test_compare_text_and_errors(series_ws: Workspace) -> None:
    r = _cli(series_ws, "report", "compare", "--models", "q-step10,q-step20")
    assert r.exit_code == 0, r.output
    assert "Left the band (beyond noise)" in r.output
    assert "saturated (above)" in r.output and "too hard (below)" in r.output
    assert "step 10" in r.output and "mean pass@2" in r.output
    assert "Paired tests" in r.output and "within noise" in r.output
    r = _cli(series_ws, "report", "compare", "--models", "q-step10,nobody")
    assert r.exit_code == 1 and "--model nobody: no finished episodes for this model" in r.output
    r = _cli(series_ws, "report", "compare", "--models", "q-step10,q-step10")
    assert r.exit_code == 1 and "--models: q-step10 given twice" in r.output


# --- TUI: model picker, heatmap, breakdowns -----------------------------------------------------------


def _screen_text(widget: object) -> str:
    from rich.console import Console

    console = Console(record=True, width=200, color_system=None)
    console.print(widget.content)  # type: ignore[attr-defined]
    return console.export_text()


class _Host(App[None]):
    def __init__(self, ws: Workspace, model: str | None = None) -> None:
        super().__init__()
        self.ws, self.model = ws, model

    def on_mount(self) -> None:
        self.push_screen(CalibrationScreen(self.ws, model=self.model))


async def test_picker_defaults_to_a_policy_model_never_an_audit_probe(workspace: Workspace) -> None:
    ws = workspace
    vid, _ = add_task(ws, "t")
    add_episodes(ws, vid, M, outcomes(1, 3, agent_error__turn_limit=1))
    for probe in ("nop", "cheat:write_reward", "oracle"):  # the audit ran last
        add_episodes(ws, vid, probe, outcomes(0, 1))
    host = _Host(ws)
    async with host.run_test(size=(180, 60)) as pilot:
        await pilot.pause()
        screen = host.screen
        assert isinstance(screen, CalibrationScreen)
        assert screen.model == M and screen.report is not None and screen.report.model == M
        select = screen.query_one("#calib-model", Select)
        labels = [str(label) for label, _ in select._options if _ is not Select.BLANK]
        assert labels[-3:] == [
            "cheat:write_reward (built-in agent)",
            "nop (built-in agent)",
            "oracle (built-in agent)",
        ]
        text = _screen_text(screen.query_one("#calib-breakdowns", Static))
        for title in ("Outcomes", "Agent error codes", "Infra error codes", "Failure tags"):
            assert title in text
        assert "turn_limit" in text


async def test_heatmap_keys_and_mouse(series_ws: Workspace) -> None:
    host = _Host(series_ws)
    async with host.run_test(size=(180, 60)) as pilot:
        await pilot.pause()
        screen = host.screen
        assert isinstance(screen, CalibrationScreen)
        assert screen.model == "q-step40"  # most recent policy model by default
        await pilot.press("h")
        await pilot.pause()
        assert screen.query_one("#calib-tabs", TabbedContent).active == "calib-tab-heatmap"
        heat = screen.query_one("#calib-heatmap", PassHeatmap)
        assert [str(c.label) for c in heat.columns.values()] == [
            "task",
            "q-step10 @10",
            "q-step20 @20",
            "q-step40 @40",
        ]
        assert heat.row_count == 4  # a, b, c + the mean row
        assert "0.52 ●" in str(heat.get_cell_at(Coordinate(0, 1)))
        assert "1.00 ▲" in str(heat.get_cell_at(Coordinate(0, 2)))
        assert "▼" in str(heat.get_cell_at(Coordinate(1, 2)))
        assert "?" in str(heat.get_cell_at(Coordinate(2, 1)))  # c at step 10: undecided
        leavers = _screen_text(screen.query_one("#calib-leavers", Static))
        assert (
            "a: q-step10 → q-step20  saturated" in leavers and "b: q-step10 → q-step20  too hard" in leavers
        )
        # keys: move to (b, q-step20) and read the cell's numbers
        heat.focus()
        await pilot.press("right", "down", "right")
        await pilot.pause()
        assert heat.cell_at_cursor() == ("b", "q-step20")
        assert "b × q-step20: n=150 c=0" in _screen_text(screen.query_one("#calib-cell", Static))
        await pilot.press("enter")
        await pilot.pause()
        assert screen.model == "q-step20"
        assert screen.query_one("#calib-tabs", TabbedContent).active == "calib-tab-report"
        # mouse: click the (c, q-step10) cell
        await pilot.press("h")
        await pilot.pause()
        cols = list(heat.columns.values())
        x = sum(col.get_render_width(heat) for col in cols[:1]) + 2
        y = heat.header_height + 2  # third row: task c
        assert await pilot.click(PassHeatmap, offset=(x, y))
        await pilot.pause()
        assert heat.cell_at_cursor() == ("c", "q-step10")
        await pilot.click(PassHeatmap, offset=(x, y))  # a second click selects it
        await pilot.pause()
        assert screen.model == "q-step10"


def test_each_model_is_judged_on_its_own_band(workspace: Workspace) -> None:
    """`[models.X] band = "LO:HI"`: solvability is model-specific, so is the band; --band overrides all."""
    (workspace.root / "bandpass.toml").write_text('[models.big]\nserved_name = "big"\nband = "0.5:1.0"\n')
    ws = Workspace.open(workspace.root)
    vid, _ = add_task(ws, "t")
    add_episodes(ws, vid, "small", outcomes(20, 46))  # decided inside [0.1, 0.9]
    add_episodes(ws, vid, "big", outcomes(30, 0))  # decided above 0.9, inside big's own [0.5, 1]
    d = json.loads(_cli(ws, "report", "compare", "--models", "small,big", "--json").output)
    assert [m["band"] for m in d["models"]] == [[0.1, 0.9], [0.5, 1.0]]
    (row,) = d["matrix"]
    assert (row["cells"]["small"]["band"], row["cells"]["big"]["band"]) == ("in", "in")
    assert d["left_band"] == []
    d = json.loads(
        _cli(ws, "report", "compare", "--models", "small,big", "--band", "0.1:0.9", "--json").output
    )
    assert d["matrix"][0]["cells"]["big"]["band"] == "above"
    assert d["left_band"][0]["kind"] == "saturated"
    per_task = json.loads(_cli(ws, "report", "--model", "big", "--json").output)["per_task"]
    assert per_task[0]["band"] == "in"
    bad = workspace.root / "bandpass.toml"
    bad.write_text('[models.big]\nband = "0.9:0.2"\n')
    r = _cli(ws, "report", "--model", "big")  # the CLI's main() prints this exception as one line
    assert r.exit_code != 0
    assert '[models.big].band: expected "LO:HI" with 0 <= LO <= HI <= 1' in str(r.exception)
