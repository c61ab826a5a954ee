"""The workspace, its configuration (``bandpass.toml``) and the in-process event bus every stage publishes
on."""
