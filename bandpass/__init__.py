"""Bandpass: curating reinforcement-learning data for terminal agents.

The code lives in the repository's top-level folders ``engine/``, ``store/`` and ``tui/`` (the layers are
described in docs/design/architecture.md); this package names them ``bandpass.engine``, ``bandpass.store`` and
``bandpass.tui`` so that an installed Bandpass never claims generic top-level names in a user's
environment.
"""
