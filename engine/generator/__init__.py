"""Task generation: Claude as a self-validating meta-agent (see ``loop`` for the lifecycle).

Public API (the CLI and the TUI's Generate screen use only these):

- :func:`generate_batch` runs N attempts and publishes :class:`~engine.core.events.GenerationEvent` on the
bus.
- :class:`Budget`, :class:`BatchResult`, :class:`GenerationResult`, :class:`GeneratorError`.
- :func:`available_versions` lists prompt versions; :func:`generation_report` computes the yield report.
- :func:`audit_dir` audits a task folder that is not in the workspace.
"""

from bandpass.engine.generator.loop import (
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
from bandpass.engine.generator.prompts import PromptError, available_versions, load_prompt
from bandpass.engine.generator.report import YieldRow, generation_report
from bandpass.engine.generator.stage import audit_dir
from bandpass.engine.llm.client import RetryPolicy

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
