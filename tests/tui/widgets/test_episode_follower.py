"""EpisodeFollower turns another process's episodes (store rows + the casts it writes) into bus events.

Rows are written through the queue's own functions (``plan_batch``, ``claim_next_episode``,
``finish_episode``) and casts by ``CastWriter`` at the paths the episode runner uses, exactly what
``bandpass run`` leaves in a workspace; ``poll()`` is called directly, one round at a time. The full path
(a real ``bandpass run`` process, its container, the TUI's panes) is in ``test_runs_executor.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bandpass.engine.core.events import (
    EpisodeFinished,
    EpisodeStarted,
    Event,
    EventBus,
    PtyOutput,
    StepFinished,
    StepStarted,
)
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.rollouts import plan_batch
from bandpass.engine.sandbox.asciicast import CastWriter
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import Episode, pk
from bandpass.tui.widgets.episode_follower import EpisodeFollower, newest_casts
from bandpass.tui.widgets.live_episodes import LiveEpisodes
from tests.support.narrow import present
from tests.support.taskfactory import make_task


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace.open(tmp_path / "ws")
    assert import_paths(ws, [make_task(tmp_path / "src", "tiny")]).ok
    return ws


class Recorder:
    def __init__(self, bus: EventBus) -> None:
        self.events: list[Event] = []
        bus.subscribe(Event, self.events.append)

    def kinds(self, episode_id: int) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for e in self.events:
            if e.episode_id != episode_id:
                continue
            if isinstance(e, PtyOutput):
                out.append((e.stream, e.data))
            elif isinstance(e, EpisodeStarted):
                out.append(("started", e.task_name))
            elif isinstance(e, EpisodeFinished):
                out.append(("finished", e.outcome))
            elif isinstance(e, StepStarted | StepFinished):
                out.append((type(e).__name__, str(e.index)))
        return out


def _setup(ws: Workspace, executor: str = "local", k: int = 1) -> tuple[str, list[Episode]]:
    with session(ws.engine) as s:
        vids = [r.version_id for r in queries.task_rows(s)]
    bid = plan_batch(ws, "oracle", vids, k, kind="builtin")
    with session(ws.engine) as s:
        queries.set_batch_executor(s, bid, executor)
        claimed = [queries.claim_next_episode(s, bid) for _ in range(k)]
    return bid, [present(c) for c in claimed]


def _cast(ws: Workspace, eid: int, name: str) -> CastWriter:
    d = ws.recordings_dir / f"episode-{eid}"
    d.mkdir(parents=True, exist_ok=True)
    return CastWriter(d / name, 80, 24)


def _finish(ws: Workspace, eid: int, outcome: str, reward: float | None) -> None:
    with session(ws.engine) as s:
        queries.finish_episode(s, eid, outcome=outcome, reward=reward)


def test_an_episode_of_another_process_becomes_bus_events(ws: Workspace) -> None:
    bus = EventBus()
    rec, live = Recorder(bus), LiveEpisodes(bus)
    live.start()
    bid, (ep,) = _setup(ws)
    eid = pk(ep)
    follower = EpisodeFollower(ws, bus, live)
    follower.poll()
    assert rec.events == []  # no batch to follow yet
    follower.follow([bid])
    follower.poll()
    assert rec.kinds(eid) == [("started", "tiny")] and follower.following == [eid]
    agent = _cast(ws, eid, "agent.cast")
    agent.output("$ echo hi\r\n")
    follower.poll()
    agent.marker("step 0")
    agent.output("hi\r\n")
    follower.poll()
    shown = live.get(eid)
    assert shown is not None and shown.step_index == 0 and shown.steps == []
    with session(ws.engine) as s:
        queries.add_step(s, eid, 0, action={"analysis": "say hi", "keystrokes": "echo hi\n"})
    follower.poll()
    assert shown.steps == [(0, {"analysis": "say hi", "keystrokes": "echo hi\n"})]
    follower.poll()  # nothing new: nothing published
    agent.close()
    with _cast(ws, eid, "verifier.cast") as verifier:
        verifier.output("PASS\r\n")
    _finish(ws, eid, "passed", 1.0)
    follower.poll()
    assert rec.kinds(eid) == [
        ("started", "tiny"),
        ("agent", "$ echo hi\r\n"),
        ("StepStarted", "0"),
        ("agent", "hi\r\n"),
        ("StepFinished", "0"),
        ("verifier", "PASS\r\n"),
        ("finished", "passed"),
    ]
    assert follower.following == []
    # the app's registry holds it like one of its own episodes
    assert shown.status == "done" and shown.outcome == "passed" and shown.verifier_seen
    follower.poll()
    assert len(rec.kinds(eid)) == 7  # done: not followed again


def test_a_retried_try_is_followed_in_its_own_cast(ws: Workspace) -> None:
    bus = EventBus()
    rec = Recorder(bus)
    bid, (ep,) = _setup(ws)
    eid = pk(ep)
    live = LiveEpisodes(bus)
    live.start()
    follower = EpisodeFollower(ws, bus, live)
    follower.follow([bid])
    first = _cast(ws, eid, "agent.cast")
    first.output("try 0 ")
    with session(ws.engine) as s:
        queries.add_step(s, eid, 0, action={"try": 0})
    follower.poll()
    first.output("died\r\n")
    first.close()
    with session(ws.engine) as s:  # what run_episode does before a new try: its steps start over
        queries.delete_steps(s, eid)
        queries.add_step(s, eid, 0, action={"try": 1})  # SQLite may hand out the deleted step's id again
    with _cast(ws, eid, "agent.try1.cast") as second:
        second.output("try 1\r\n")
        assert newest_casts(ws.recordings_dir / f"episode-{eid}")["agent"][0] == 1
        follower.poll()
    assert [d for s, d in rec.kinds(eid) if s == "agent"] == ["try 0 ", "died\r\n", "try 1\r\n"]
    shown = live.get(eid)
    assert shown is not None and shown.steps == [(0, {"try": 0}), (0, {"try": 1})]


def test_an_episode_that_ran_between_two_polls_gets_its_whole_recording(ws: Workspace) -> None:
    bus = EventBus()
    rec = Recorder(bus)
    follower = EpisodeFollower(ws, bus, LiveEpisodes(bus))
    bid, (ep,) = _setup(ws)
    eid = pk(ep)
    with _cast(ws, eid, "agent.cast") as agent:
        agent.output("quick\r\n")
    _finish(ws, eid, "failed", 0.0)
    follower.follow([bid], finished=[bid])  # seen done already: read one last time, then dropped
    assert follower.batches == [bid]
    follower.poll(store=False)  # no commit seen since, yet a batch seen done is read that last time
    assert rec.kinds(eid) == [("started", "tiny"), ("agent", "quick\r\n"), ("finished", "failed")]
    assert follower.batches == []


def test_a_batch_seen_done_after_its_last_commit_is_still_dropped(ws: Workspace) -> None:
    """The follower reads the store only after a commit; the Runs screen may see a batch done only after
    the follower read its last commit. That batch must still be dropped (it was polled for good: a CI run
    under load waited 30 s for it)."""
    bus = EventBus()
    rec = Recorder(bus)
    follower = EpisodeFollower(ws, bus, LiveEpisodes(bus))
    bid, (ep,) = _setup(ws)
    eid = pk(ep)
    follower.follow([bid])
    _finish(ws, eid, "failed", 0.0)
    follower.poll()  # its last commit, read while the batch was not yet known to be done
    assert rec.kinds(eid) == [("started", "tiny"), ("finished", "failed")] and follower.batches == [bid]
    follower.follow([bid], finished=[bid])
    follower.poll(store=False)  # nothing committed since
    assert follower.batches == [] and follower.idle
    assert len(rec.kinds(eid)) == 2  # and nothing shown twice


def test_history_own_batches_ray_batches_and_bus_episodes_are_not_followed(ws: Workspace) -> None:
    bus = EventBus()
    rec, live = Recorder(bus), LiveEpisodes(bus)
    live.start()
    old, (done,) = _setup(ws)
    _finish(ws, pk(done), "passed", 1.0)
    own: set[str] = set()
    follower = EpisodeFollower(ws, bus, live, is_own_batch=own.__contains__)
    mine, _ = _setup(ws)
    own.add(mine)
    ray, _ = _setup(ws, executor="ray")
    theirs, (a, b) = _setup(ws, k=2)
    bus.publish(EpisodeStarted(episode_id=pk(b), task_name="tiny"))  # ours
    follower.follow([old, mine, ray, theirs])
    follower.poll()
    started = [e.episode_id for e in rec.events if isinstance(e, EpisodeStarted)]
    # `done` ended before the follower started; `b` was on the bus already (published just above)
    assert started == [b.id, a.id] and follower.following == [a.id]


def test_a_broken_cast_stops_that_stream_only(ws: Workspace) -> None:
    bus = EventBus()
    rec = Recorder(bus)
    bid, (ep,) = _setup(ws)
    eid = pk(ep)
    follower = EpisodeFollower(ws, bus, LiveEpisodes(bus))
    follower.follow([bid])
    d = ws.recordings_dir / f"episode-{eid}"
    d.mkdir(parents=True)
    (d / "agent.cast").write_text("not a cast\n")
    with _cast(ws, eid, "verifier.cast") as verifier:
        verifier.output("still shown\r\n")
    follower.poll()
    follower.poll()
    assert rec.kinds(eid) == [("started", "tiny"), ("verifier", "still shown\r\n")]
