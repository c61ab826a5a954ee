"""Episodes and batches of them: the episode in phases (environment, agent, verifier, finalise), the verifier,
the agents (built-in probes and the policy), the policy client, rollouts and the executors that place them."""
