"""The application layer: the use cases both front ends call.

The CLI (``tui/commands``) and the screens (``tui/screens``) are adapters: they parse options or read
widgets, call one function here, and render its result. What a use case does — the order of its checks,
what it refuses and with which message, what it plans in the database — is written once, here, so the two
front ends cannot drift. Modules:

- ``batches``: start a rollout batch (connect → check the endpoint → plan) and resume one.
- ``reads``: the queries the front ends read through (they never import ``store``).
- ``errors``: the application's own refusals, all ``BandpassError``.
- ``episode_hooks``: what follows every episode's end (its diagnosis) and runs beside every batch (the
  search indexer), wired onto the runner's hooks by each entry point that runs episodes.

It is the top engine layer (import contract in pyproject.toml): it may import every stage, no stage
imports it, and it knows no UI toolkit. Progress reaches a front end through callbacks or the event bus.
"""
