"""One container and its host-held terminal: the Docker engine, the locked-down container, the warm pool,
the pty session with OSC 133 markers, the terminal emulator and the asciicast recorder."""
