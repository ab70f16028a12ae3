"""Prompt sizes in tokens, counted one way everywhere (the hook, ``import-logs``, the offline bench, the demo),
and LiteLLM told to read its bundled model-cost map rather than download one."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np


def bundled_cost_map() -> None:
    """LiteLLM downloads its model-cost map at import unless told to read the bundled one: call this before
    LiteLLM's first import, and nothing touches the network (an operator may still set
    LITELLM_LOCAL_MODEL_COST_MAP=False). The gateway package and :func:`count_tokens` call it first."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def count_tokens(texts: Sequence[str]) -> np.ndarray:
    """(n,) each text's size in tokens as LiteLLM counts it (``token_counter``: OpenAI's tokenizer)."""
    bundled_cost_map()
    import litellm

    return np.array([litellm.token_counter(text=t) if t else 0 for t in texts], dtype=np.float64)
