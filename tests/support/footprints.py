"""Versions whose footprint is already known, as after an audit: for tests about something else.

Every batch started through the application layer first learns, from the oracle, where each version
no audit settled is verified (engine/audit/adoption.py: one oracle episode per version, rows in a
``footprint-…`` batch). A test that counts a workspace's episodes, or follows the first one that runs,
is about the batch, not that learning (tests/engine/audit/test_adoption.py is): it records the footprint
an audit would have found for these sound tasks — verified in the clean room, nothing adopted.
"""

from __future__ import annotations

from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.queries import endstate as endstate_store


def footprints_known(ws: Workspace) -> None:
    with session(ws.engine) as s:
        for row in queries.task_rows(s):
            footprint = {"mode": "clean_room", "why": "the oracle passes in the clean room", "source": "test"}
            endstate_store.set_version_footprint(s, row.version_id, footprint, [])
