"""The task.toml the scripted generator writes in the generator's tests.

Shared because the differential test (tests/engine/tasks/test_harbor_parity.py) checks that Harbor's own
loader accepts what Bandpass's generator is shown writing, this file included.
"""

from __future__ import annotations

TASK_TOML = """version = "1.0"

[task]
name = "bandpass/sum-numbers-gen"

[metadata]
difficulty = "easy"
category = "text-processing"
tags = ["arithmetic", "awk"]

[agent]
timeout_sec = 60.0

[verifier]
timeout_sec = 30.0

[environment]
build_timeout_sec = 120.0
cpus = 1
memory_mb = 256
network_mode = "no-network"
workdir = "/app"
"""
