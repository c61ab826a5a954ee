"""A terminal without a container, for policy-agent tests that drive every outcome deterministically."""

from __future__ import annotations

import time

from bandpass.engine.sandbox.terminal import WaitResult


class FakeTerminal:
    """Same surface as ``TerminalSession``; a command's output is looked up by its keystrokes."""

    def __init__(self, outputs: dict[str, str] | None = None, delay: float = 0.0) -> None:
        self.outputs = outputs or {}
        self.delay = delay
        self.sent: list[tuple[str, float]] = []
        self.lines: list[str] = ["$ "]

    def send(self, keys: str) -> None:
        self.sent.append((keys, 0.0))

    def send_and_wait(self, keys: str, timeout: float, quiescence: float = 2.0) -> WaitResult:
        self.sent.append((keys, timeout))
        if self.delay:
            time.sleep(min(self.delay, timeout))
        out = keys + self.outputs.get(keys, "")
        self.lines[-1] += keys.rstrip("\n")
        self.lines.extend(out.splitlines()[1:] + ["$ "])
        done = keys.endswith("\n") and self.delay <= timeout
        return WaitResult(
            completed=done,
            exit_code=0 if done else None,
            timed_out=not done,
            quiescent=False,
            output=out,
            duration=min(self.delay, timeout),
        )

    def screen_text(self) -> str:
        return "\n".join(self.lines[-40:])

    def recent_output(self, max_bytes: int) -> str:
        return self.screen_text()[-max_bytes:]

    def interrupt(self) -> None:
        self.send("\x03")
