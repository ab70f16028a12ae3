"""regret-gateway: a LiteLLM proxy plugin with a causal regret-minimising router learned from its own logs."""

__version__ = "0.1.0"
