"""The LiteLLM proxy integration: tier resolution, routing decisions, the hook, the feedback routes."""

import os


def bundled_cost_map() -> None:
    """LiteLLM downloads its model-cost map at import unless told to read the bundled one: call this before
    LiteLLM's first import, and a gateway starts without touching the network (an operator may still set
    LITELLM_LOCAL_MODEL_COST_MAP=False). The hook's modules import LiteLLM: this package calls it first."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


bundled_cost_map()
