"""A live pane in the session's process shows the session's own Screen: each byte is parsed once."""

from __future__ import annotations

from bandpass.engine.core.events import EventBus, PtyOutput
from bandpass.engine.sandbox.emulator import Screen
from bandpass.engine.sandbox.terminal import live_screen, register_live_screen
from bandpass.tui.widgets.feed_pump import pump
from bandpass.tui.widgets.live_episodes import LiveEpisodes


def test_pane_shows_the_session_screen_and_does_not_feed_it_again() -> None:
    bus = EventBus()
    live = LiveEpisodes(bus)
    live.start()
    session_screen = Screen(80, 10)
    register_live_screen(4242, "agent", session_screen)
    # The session feeds its screen, then publishes the same bytes (engine/sandbox/terminal.py order).
    session_screen.feed("hello\r\n")
    bus.publish(PtyOutput(episode_id=4242, stream="agent", data="hello\r\n"))
    ep = live.get(4242)
    assert ep is not None
    assert ep.screen("agent") is session_screen
    assert ep.bytes_in == len("hello\r\n")
    assert session_screen.text() == "hello"  # not "hello\nhello": nobody parsed it twice


def test_episode_from_another_process_gets_its_own_screen_fed_by_the_pump() -> None:
    bus = EventBus()
    live = LiveEpisodes(bus)
    live.start()
    assert live_screen(4343, "agent") is None
    bus.publish(PtyOutput(episode_id=4343, stream="agent", data="remote output"))
    ep = live.get(4343)
    assert ep is not None
    scr = ep.screen("agent")
    assert pump.drain(timeout=30.0)  # waits until the pump thread has parsed everything submitted
    assert scr.text() == "remote output"
