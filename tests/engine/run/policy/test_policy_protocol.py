"""The action parser and the context budget: pure functions, no server."""

from __future__ import annotations

import json

import pytest

from bandpass.engine.run.policy.context import (
    ContextOverflow,
    PromptTemplates,
    build_observation,
    cut_note,
    estimate_tokens,
    trim_history,
)
from bandpass.engine.run.policy.protocol import MAX_DURATION, MIN_DURATION, ActionParseError, parse_action


def _obj(**kw: object) -> str:
    base: dict[str, object] = {"analysis": "a", "plan": "p", "commands": [], "task_complete": False}
    base.update(kw)
    return json.dumps(base)


# --- parse_action --- #


def test_plain_object() -> None:
    a = parse_action(_obj(commands=[{"keystrokes": "ls\n", "duration": 0.5}]))
    assert a.analysis == "a" and a.plan == "p" and not a.task_complete
    assert [(c.keystrokes, c.duration) for c in a.commands] == [("ls\n", 0.5)]
    assert a.notes == []


def test_fenced_block_with_prose() -> None:
    text = "Sure! Here is my answer:\n```json\n" + _obj(task_complete=True) + "\n```\nGood luck."
    a = parse_action(text)
    assert a.task_complete
    assert "text outside the JSON object was ignored" in a.notes


def test_object_inside_prose_skips_non_json_braces() -> None:
    text = "I will use {braces} in bash. " + _obj(commands=[{"keystrokes": "echo '{}'\n"}]) + " done"
    a = parse_action(text)
    assert a.commands[0].keystrokes == "echo '{}'\n"
    assert a.commands[0].duration == 1.0  # default when missing


def test_braces_inside_strings_do_not_confuse_balancing() -> None:
    text = _obj(commands=[{"keystrokes": "awk '{print $1}' f }}}\n", "duration": 1}])
    assert parse_action(text).commands[0].keystrokes == "awk '{print $1}' f }}}\n"


def test_missing_analysis_and_plan_tolerated() -> None:
    a = parse_action('{"commands": [{"keystrokes": "pwd\\n", "duration": 0.1}]}')
    assert a.analysis == "" and a.plan == "" and len(a.commands) == 1


def test_task_complete_without_commands() -> None:
    assert parse_action('{"analysis": "done", "task_complete": true}').task_complete


def test_is_task_complete_alias() -> None:
    assert parse_action('{"commands": [], "is_task_complete": true}').task_complete


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty reply"),
        ("I would run ls.", "no JSON object found"),
        ('{"commands": [{"keystrokes": "ls\\n", "duration": 1}', "the JSON object is never closed"),
        ('{"commands": [],}', "invalid JSON: "),
        ("[1, 2]", "got a JSON array"),
        ('{"analysis": "x"}', 'missing "commands"'),
        ('{"commands": "ls"}', "commands: expected a list, got 'ls'"),
        ('{"commands": ["ls"]}', "commands[0]: expected an object"),
        ('{"commands": [{"duration": 1}]}', 'commands[0]: missing "keystrokes"'),
        ('{"commands": [{"keystrokes": 5}]}', "commands[0].keystrokes: expected a string, got 5"),
        (
            '{"commands": [{"keystrokes": "a", "duration": 1}, {"keystrokes": "b", "duration": "x"}]}',
            "commands[1].duration: expected a number, got 'x'",
        ),
        ('{"commands": [{"keystrokes": "a", "duration": true}]}', "commands[0].duration: expected a number"),
        ('{"commands": [{"keystrokes": "a", "duration": NaN}]}', "invalid JSON: NaN is not valid JSON"),
        ('{"commands": [], "task_complete": "maybe"}', "task_complete: expected true or false"),
        ('{"analysis": 3, "commands": []}', "analysis: expected a string, got 3"),
    ],
)
def test_specific_errors(text: str, message: str) -> None:
    with pytest.raises(ActionParseError) as ei:
        parse_action(text)
    assert message in ei.value.message


def test_durations_clamped_and_noted() -> None:
    a = parse_action(
        _obj(commands=[{"keystrokes": "a", "duration": 0}, {"keystrokes": "b", "duration": 9999}])
    )
    assert [c.duration for c in a.commands] == [MIN_DURATION, MAX_DURATION]
    assert a.notes == ["commands[0].duration 0 clamped to 0.1", "commands[1].duration 9999 clamped to 120"]


def test_as_dict_round_trip_is_json() -> None:
    a = parse_action(_obj(commands=[{"keystrokes": "C-c", "duration": 0.1}], task_complete=True))
    d = json.loads(json.dumps(a.as_dict()))
    assert d["commands"] == [{"keystrokes": "C-c", "duration": 0.1}] and d["task_complete"] is True


# --- observation --- #


def test_observation_within_budget_is_uncut() -> None:
    obs = build_observation("$ ls\nfile\n$ ", "ls\r\nfile\r\n", 4000)
    assert obs.cuts == []
    assert "file" in obs.text and "bytes cut" not in obs.text


def test_observation_output_cut_in_the_middle_with_note() -> None:
    out = "HEAD\n" + "x" * 50_000 + "\nTAIL"
    obs = build_observation("$ ", out, 2000)
    assert len(obs.text.encode()) <= 2000
    assert obs.text.count("[… ") == 1 and "HEAD" in obs.text and "TAIL" in obs.text
    (cut,) = obs.cuts
    assert cut["kind"] == "observation" and cut["part"] == "output"
    assert cut_note(cut["bytes_cut"]) in obs.text
    assert cut["bytes_cut"] > 48_000


def test_observation_screen_cut_keeps_the_bottom() -> None:
    screen = "\n".join(f"row {i}" for i in range(2000))
    obs = build_observation(screen, "new stuff", 500)
    assert "row 1999" in obs.text and "row 0\n" not in obs.text
    parts = {c["part"] for c in obs.cuts}
    assert parts == {"screen", "output"}  # no room left for output: dropped whole, and said so
    assert len(obs.text.encode()) <= 600


def test_observation_cut_respects_utf8() -> None:
    obs = build_observation("", "é" * 10_000, 1001)
    obs.text.encode("utf-8")  # no split code points
    assert obs.cuts


# --- history --- #


def _history(turns: int, size: int) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": "S" * 100}, {"role": "user", "content": "TASK " + "t" * 100}]
    for i in range(turns):
        msgs.append({"role": "assistant", "content": f"reply {i} " + "a" * size})
        msgs.append({"role": "user", "content": f"obs {i} " + "o" * size})
    return msgs


def test_history_fits_untouched() -> None:
    msgs = _history(3, 100)
    out, cuts = trim_history(msgs, context_window=32768, max_tokens=1024)
    assert out is msgs and cuts == []


def test_history_trimmed_keeps_system_task_and_recent_turns() -> None:
    msgs = _history(20, 3500)  # ~1000 tokens per message
    out, cuts = trim_history(msgs, context_window=8192, max_tokens=1024)
    assert out[0] == msgs[0]
    assert (
        out[1]["content"].startswith("TASK")
        and "earlier turns cut to fit the context window" in out[1]["content"]
    )
    assert out[-1] == msgs[-1] and out[-2] == msgs[-2]
    roles = [m["role"] for m in out[2:]]
    assert roles == ["assistant", "user"] * (len(roles) // 2)
    (cut,) = cuts
    assert cut["kind"] == "history" and cut["messages_dropped"] == len(msgs) - len(out)
    assert estimate_tokens(out) <= 8192 - 1024


def test_history_overflow_when_even_the_minimum_is_too_big() -> None:
    msgs = _history(1, 100_000)
    with pytest.raises(ContextOverflow) as ei:
        trim_history(msgs, context_window=4096, max_tokens=512)
    assert ei.value.cut["kind"] == "context_overflow"


def test_prompt_templates_render_placeholders_only() -> None:
    p = PromptTemplates("terminus-v1")
    system = p.render("system")
    assert '"keystrokes"' in system and "task_complete" in system  # JSON braces survive untouched
    first = p.render("first", instruction="Write hello.txt", observation="$ ")
    assert "Write hello.txt" in first and "{{" not in first
    with pytest.raises(FileNotFoundError, match="terminus-v1"):
        PromptTemplates("nope")


def test_observation_output_is_plain_text() -> None:
    raw = "ls --color\r\n\x1b[01;34mdir\x1b[0m  file\r\n 10%\r 50%\r100%\r\n\x1b]0;title\x07done"
    obs = build_observation("$ ", raw, 4000)
    assert obs.text.endswith("ls --color\ndir  file\n100%\ndone")
