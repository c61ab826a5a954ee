"""Why an episode ended: outcome codes, the failure taxonomy, tagging and replay."""
