"""What an episode's policy changed in its container: the end state captured when the agent stopped
(added / modified / deleted against the image) with the tamper guard's findings, and one file's diff
against the image — ``bandpass changes``, the Changes screen and ``bandpass show``'s end state.

Apart from :mod:`engine.app.episodes` because reading the image's side of a diff needs the Docker client,
which the other evidence reads do not.
"""

from __future__ import annotations

from ..run.endstate import change_diff, episode_changes

__all__ = ["change_diff", "episode_changes"]
