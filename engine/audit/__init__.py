"""Proving a verifier honest: oracle, nop, cheat probes and reruns; the recorded sample episodes."""
