from pathlib import Path

SUMMARY = Path("/app/summary.json")


def test_summary_written():
    assert SUMMARY.exists(), f"{SUMMARY} was not created"
