"""Reward files read as Harbor 0.25 reads them: its own verifier code (``.venv-harbor``) is the reference.

For every pair of reward files below, Harbor's ``Verifier`` parses them (``reward.json`` first, else
``reward.txt``) into a ``VerifierResult``, and its CLI takes the primary reward from that. Bandpass's
reading (engine/tasks/rewards.py) must refuse exactly what Harbor refuses, keep exactly Harbor's
``rewards`` as the components, and agree with Harbor's primary reward wherever Harbor has one; where
Harbor has none, Bandpass's rule may still find the author's score (``reward.txt`` beside a multi-key
``reward.json``, a declared primary) — never a different one.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.tasks import rewards

REPO = Path(__file__).resolve().parents[3]
HARBOR_PY = REPO / ".venv-harbor" / "bin" / "python"
HARBOR_REF = REPO / "tests" / "support" / "harbor_ref.py"

JSONS: list[bytes | None] = [
    None,
    b'{"reward": 1}',
    b'{"reward": 0.5}\n',
    b'{"reward": 0}',
    b'{"reward": 1, "extra": 0}',
    b'{"success": 1, "clips_correct": 1, "speed": 0.25}',
    b'{"correctness": 1, "performance": 0}',
    b'{"accuracy": 0.75}',
    b"{}",
    b"1",
    b"[1]",
    b'"1"',
    b'{"reward": "1"}',
    b'{"reward": null}',
    b'{"reward": NaN}',
    b'{"reward": Infinity}',
    b'{"reward": 1e309}',
    b'{"reward": true}',
    b'{"reward": {"x": 1}}',
    b"",
    b"{",
    b"\xff\xfe",
    b'  {"reward" : 1.000 }  \n',
]
TXTS: list[bytes | None] = [
    None,
    b"1",
    b"0\n",
    b" 1 \n",
    b"0.5",
    b"1e0",
    b"1_0",
    b"-0",
    b"",
    b"   \n",
    b"yes",
    b"nan",
    b"inf",
    b"\xff",
]
CASES = [(j, t) for j in JSONS for t in TXTS if j is not None or t is not None]


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def harbor() -> list[dict[str, Any]]:
    if not HARBOR_PY.is_file():
        pytest.fail(f"{HARBOR_PY} is missing: run `bash scripts/setup-harbor.sh` (scripts/test does)")
    stdin = json.dumps([{"json": _b64(j), "txt": _b64(t)} for j, t in CASES])
    proc = subprocess.run(
        [str(HARBOR_PY), str(HARBOR_REF), "rewards"], input=stdin, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


def test_reward_files_are_read_as_harbor_reads_them(harbor: list[dict[str, Any]]) -> None:
    assert len(harbor) == len(CASES)
    wrong = []
    for (j, t), ref in zip(CASES, harbor, strict=True):
        ours = rewards.read(j, t)
        refused = ours.reward is None and not ours.unscored
        if "error" in ref:
            if not refused:
                wrong.append(f"{j!r} {t!r}: Harbor refuses ({ref['error']}), Bandpass read {ours.as_dict()}")
            continue
        if refused:
            wrong.append(f"{j!r} {t!r}: Harbor reads {ref}, Bandpass refuses: {ours.problem}")
            continue
        if ours.components != ref["rewards"]:
            wrong.append(f"{j!r} {t!r}: components {ours.components} != Harbor's rewards {ref['rewards']}")
        if rewards.harbor_scalar(ours) != ref["primary"]:
            wrong.append(
                f"{j!r} {t!r}: Harbor's primary {ref['primary']}, ours {rewards.harbor_scalar(ours)}"
            )
        if ref["primary"] is not None and ours.reward != ref["primary"]:
            wrong.append(f"{j!r} {t!r}: scalar {ours.reward} where Harbor's primary is {ref['primary']}")
    assert not wrong, "\n".join(wrong)


def test_the_rule_keeps_the_authors_score_where_harbor_has_none() -> None:
    multi = b'{"success": 1, "clips_correct": 0}'
    # reward.txt beside a multi-key reward.json: the author's score (Harbor ignores reward.txt)
    assert rewards.read(multi, b"1\n").reward == 1.0
    assert rewards.read(multi, b"1\n").components == {"success": 1.0, "clips_correct": 0.0}
    # no reward.txt: unscored, components kept, the fix named once
    alone = rewards.read(multi, None)
    assert alone.reward is None and alone.unscored and alone.components["success"] == 1.0
    assert "primary_reward" in alone.problem
    # a declared primary picks its key; a declared key that is not there says so
    assert rewards.read(multi, None, primary="clips_correct").reward == 0.0
    missing = rewards.read(multi, None, primary="speed")
    assert missing.reward is None and '"speed" is not in reward.json' in missing.problem
