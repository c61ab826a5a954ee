"""``python -m bandpass``: the same as the ``bandpass`` command."""

from bandpass.tui.cli import main

main()
