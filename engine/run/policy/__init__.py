"""Policy models behind OpenAI-compatible endpoints: client, action protocol, context budgeting."""
