"""Marks the checkout's root as the root of the ``bandpass`` package's code, so that tools reading the
tree by path resolve its imports.

``engine/``, ``store/`` and ``tui/`` import one another relatively (``from ..engine.app import reads`` in
``tui/``), which is a path: from ``tui/`` two dots is this folder, where ``engine/`` lives. At run time the
same dots resolve inside the installed package ``bandpass`` (``bandpass/`` links to the three folders), so
the imports mean the same thing to Python, to mypy and import-linter (which read ``bandpass``) and to
anything that reads files. Nothing imports this file.
"""
