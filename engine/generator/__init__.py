"""Task generation: Claude as a self-validating meta-agent (see ``loop`` for the lifecycle).

Public API (the CLI and the TUI's Generate screen use only these):

- :func:`generate_batch` runs N attempts and publishes :class:`~engine.core.events.GenerationEvent` on the
bus.
- :class:`Budget`, :class:`BatchResult`, :class:`GenerationResult`, :class:`GeneratorError`.
- :func:`available_versions` lists prompt versions; :func:`generation_report` computes the yield report.
- :func:`audit_dir` audits a task folder that is not in the workspace.
"""

from ..llm.client import RetryPolicy
from ..llm.templates import PromptError
from .loop import (
    DEFAULT_PROMPT,
    BatchResult,
    Budget,
    GenerationResult,
    GeneratorError,
    GeneratorUnreachable,
    generate_batch,
    resolve_api,
    scratch_path,
)
from .prompts import available_versions, load_prompt
from .report import YieldRow, generation_report
from .stage import audit_dir

__all__ = [
    "DEFAULT_PROMPT",
    "BatchResult",
    "Budget",
    "GenerationResult",
    "GeneratorError",
    "GeneratorUnreachable",
    "PromptError",
    "RetryPolicy",
    "YieldRow",
    "audit_dir",
    "available_versions",
    "generate_batch",
    "generation_report",
    "load_prompt",
    "resolve_api",
    "scratch_path",
]
