"""The LiteLLM proxy integration: tier resolution, routing decisions, the hook, the feedback routes."""
