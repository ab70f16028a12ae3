"""The LiteLLM proxy integration: tier resolution, routing decisions, the hook, the feedback routes."""

from regret_gateway.tokens import bundled_cost_map

bundled_cost_map()  # before any module of this package imports LiteLLM

__all__ = ["bundled_cost_map"]
