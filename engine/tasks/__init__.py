"""Task directories: load and validate the Harbor format, hash versions, convert Terminal-Bench 1, import,
build images."""
