"""Fixtures shared by the engine's stage tests."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

# The two-raylet cluster started with the ray CLI (tests/support/ray_cluster.py), for the executor and
# audit tests that need real raylets: its fixtures, registered here so those modules use them by name.
from tests.support.ray_cluster import cluster, nodes, ray_cli_cluster  # noqa: F401


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A local Ray instance (head + worker processes) for one module; always shut down, so no raylet or GCS
    outlives the tests. Never skipped: CI installs the ``cluster`` extra."""
    try:
        import ray
    except ImportError:  # like Docker, never skipped silently: CI must install the extra
        pytest.fail("Ray is not installed: pip install -e '.[dev,cluster]' ")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()
