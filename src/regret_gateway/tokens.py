"""Prompt sizes in tokens as LiteLLM counts them (OpenAI's tokenizer), and LiteLLM told to read its bundled
model-cost map rather than download one. :func:`count_tokens` sizes a prompt's text for the size feature (the
gateway, ``import-logs``, the offline bench); :func:`count_message_tokens` a whole request, for the cost caps."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np


def bundled_cost_map() -> None:
    """LiteLLM downloads its model-cost map at import unless told to read the bundled one: call this before
    LiteLLM's first import, and nothing touches the network (an operator may still set
    LITELLM_LOCAL_MODEL_COST_MAP=False). The gateway package and the counters here call it first."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def count_tokens(texts: Sequence[str]) -> np.ndarray:
    """(n,) each text's size in tokens as LiteLLM counts it (``token_counter``: OpenAI's tokenizer)."""
    bundled_cost_map()
    import litellm

    return np.array([litellm.token_counter(text=t) if t else 0 for t in texts], dtype=np.float64)


def count_message_tokens(messages: list | None) -> int | None:
    """A chat request's size in tokens (``token_counter`` over the whole conversation), what a tier's cost cap
    reads; None where it cannot be counted."""
    bundled_cost_map()
    import litellm

    try:
        return int(litellm.token_counter(messages=messages)) if messages else None
    except Exception:  # noqa: BLE001 - a shape LiteLLM cannot count: the cap predicts without the size
        return None
