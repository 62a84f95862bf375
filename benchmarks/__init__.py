"""agentkit benchmark suite: a local mock LLM server and scenarios measured against raw loops."""
