"""The LiteLLM proxy integration: tier resolution, routing decisions, the hook, the feedback routes."""

import os

# The hook's modules import LiteLLM, which downloads its model-cost map at import unless told to read the
# bundled one: a gateway starts without touching the network (an operator may still set it to False).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
