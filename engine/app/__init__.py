"""The application layer: the use cases both front ends call.

The CLI (``tui/commands``) and the screens (``tui/screens``) are adapters: they parse options or read
widgets, call one function here, and render its result. What a use case does — the order of its checks,
what it refuses and with which message, what it plans in the database — is written once, here, so the two
front ends cannot drift. Modules:

- ``batches``: start a rollout batch (connect → check the endpoint → plan) and resume one;
  ``executors``: the one executor factory; ``adaptive``: band rounds.
- ``tagging``: tag, clear, skip, undo, the queue, a review accepted as a tag; ``review``: Claude's reviews;
  ``diagnosis``: diagnoses and failure clusters.
- ``episodes`` and ``changes``: one episode's evidence; ``replay``, ``search``, ``terminal``, ``live``:
  recordings, the text terminals showed, and what a terminal shows.
- ``calibration``, ``gates``, ``overview``, ``export``: reports, the gates, the workspace at a glance, the
  training set.
- ``generate``, ``prices``, ``tasks``, ``audit``, ``regrade``, ``policy``, ``machine``, ``leftovers``,
  ``demo``: the other use cases, one module each.
- ``reads``: the queries the front ends read through (they never import ``store``).
- ``errors``: the application's own refusals, all ``BandpassError``.
- ``episode_hooks``: what follows every episode's end (its diagnosis) and runs beside every batch (the
  search indexer), wired onto the runner's hooks by each entry point that runs episodes.

It is the top engine layer and the front ends' one door (import contracts in pyproject.toml): it may
import every stage, no stage imports it, it knows no UI toolkit, and ``tui`` imports nothing of the engine
but this package and ``engine.core``; a stage's name a front end needs is re-exposed by the module of its
use case (in ``__all__``). Progress reaches a front end through callbacks or the event bus.
"""
