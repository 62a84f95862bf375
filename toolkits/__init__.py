"""Ready-made toolkits built on agentkit's public API only."""
