"""Band rounds: the adaptive sampler's settings, the next round's plan and a round's status, as the
Calibration screen shows them and ``a`` runs one (``bandpass run --adaptive`` plans through
``engine.app.batches``).

Why a module of its own: the sampler loads the calibration and the rollout machinery together; the screen
and ``bandpass run`` reach it here, and commands that only read a report do not load it.
"""

from __future__ import annotations

from ..calibration.adaptive import (
    DEFAULT_FIRST,
    DEFAULT_MAX_K,
    DEFAULT_STEP,
    AdaptiveSampler,
    AdaptiveSettings,
    AdaptiveStatus,
    Plan,
    plan_round,
    run_adaptive,
    task_score,
    task_states,
)

__all__ = [
    "DEFAULT_FIRST",
    "DEFAULT_MAX_K",
    "DEFAULT_STEP",
    "AdaptiveSampler",
    "AdaptiveSettings",
    "AdaptiveStatus",
    "Plan",
    "plan_round",
    "run_adaptive",
    "task_score",
    "task_states",
]
