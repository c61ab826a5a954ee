"""The one LLM client layer (the Anthropic Messages API over the ``anthropic`` SDK): streaming turns with
tool use, retries, usage and prices, prompt templates. The generator and the reviewer both talk to Claude
through it, so neither stage imports the other."""
