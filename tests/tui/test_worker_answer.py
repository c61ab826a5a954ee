"""A worker's answer that reaches a screen being taken down is dropped; on a live screen a missing widget
still raises (the CI failure this guards: the Tasks screen's audit poll answering while the app quit)."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static

from bandpass.tui.worker_answer import dropped_once_gone


class Board(Screen[None]):
    """Answers land in ``#line``; ``answer_on_unmount`` makes one arrive while the screen is pruned."""

    answer_on_unmount = False

    def compose(self) -> ComposeResult:
        yield Static("", id="line")

    @dropped_once_gone
    def show(self, text: str) -> None:
        self.query_one("#line", Static).update(text)

    @dropped_once_gone
    def show_elsewhere(self, text: str) -> None:
        self.query_one("#no-such-line", Static).update(text)

    def on_unmount(self) -> None:
        if self.answer_on_unmount:
            self.show("too late")  # its widgets are gone by now, as they are for a worker's late answer


class BoardApp(App[None]):
    def __init__(self, board: Board) -> None:
        super().__init__()
        self.board = board

    def on_mount(self) -> None:
        self.push_screen(self.board)


async def test_an_answer_while_the_app_quits_is_dropped_not_a_crash() -> None:
    board = Board()
    board.answer_on_unmount = True
    app = BoardApp(board)
    async with app.run_test() as pilot:
        await pilot.pause()
        board.show("shown")
        assert str(board.query_one("#line", Static).render()) == "shown"
    assert app.return_code in (None, 0)  # the late answer raised nothing on its way out


async def test_an_answer_after_the_screen_is_gone_is_dropped() -> None:
    board = Board()
    app = BoardApp(board)
    async with app.run_test() as pilot:
        await pilot.pause()
        app.pop_screen()
        await pilot.pause()
        board.show("nobody sees this")  # no widget, no error
        assert not board.is_attached


async def test_a_missing_widget_on_a_live_screen_still_raises() -> None:
    board = Board()
    app = BoardApp(board)
    async with app.run_test() as pilot:
        await pilot.pause()
        with pytest.raises(NoMatches):
            board.show_elsewhere("a wrong selector is a bug, not a late answer")
