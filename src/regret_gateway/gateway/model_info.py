"""What each routed model (a LiteLLM model group) can take and what its input costs: its context window, its
output limit, whether it takes tools, images and a JSON schema, its input and cached input price per token.

Read, each over the one before: LiteLLM's cost map for the deployment's model (``litellm.get_model_info``),
the deployment's own ``model_info`` and prices in the proxy's ``model_list``, and the ``model_info:`` section
of the settings. Over a group's deployments the strictest limit wins (any of them may answer). What nobody
states stays None: not checked (eligibility) or not priced (sessions' lost cache).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from regret_gateway.config import Settings
from regret_gateway.limits import ModelInfo

log = logging.getLogger(__name__)


def litellm_info(model: str) -> ModelInfo:
    """What LiteLLM's cost map says of ``model`` (a deployment's ``litellm_params.model``); nothing where it
    does not know it."""
    from regret_gateway.tokens import bundled_cost_map

    bundled_cost_map()
    import litellm

    try:
        return ModelInfo.of(dict(litellm.get_model_info(model)))
    except Exception:  # noqa: BLE001 - an unknown model: LiteLLM raises
        return ModelInfo()


def deployment_info(deployment: Mapping) -> ModelInfo:
    """One ``model_list`` entry's: its ``model_info`` and ``litellm_params`` prices over LiteLLM's cost map."""
    params = deployment.get("litellm_params") or {}
    model = params.get("model") if isinstance(params, Mapping) else None
    base = litellm_info(model) if isinstance(model, str) else ModelInfo()
    stated = ModelInfo.of(deployment.get("model_info") if isinstance(deployment.get("model_info"), Mapping) else None)
    priced = ModelInfo.of({k: v for k, v in params.items() if "cost" in k} if isinstance(params, Mapping) else None)
    return stated.over(priced.over(base))


def group_info(model_list: Sequence[Mapping], settings: Settings) -> dict[str, ModelInfo]:
    """Each of ``settings.models``' info: its deployments' strictest, under the settings' ``model_info``."""
    out: dict[str, ModelInfo] = {}
    for m in settings.models:
        infos = [deployment_info(d) for d in model_list if isinstance(d, Mapping) and d.get("model_name") == m]
        info = infos[0] if infos else ModelInfo()
        for other in infos[1:]:
            info = info.strictest(other)
        if (spec := settings.model_info.get(m)) is not None:
            info = ModelInfo.of(spec.model_dump()).over(info)
        out[m] = info
    return out


def proxy_model_list() -> list[dict]:
    """The running LiteLLM proxy's ``model_list`` ([] outside a proxy, or before its router is built)."""
    try:
        from litellm.proxy import proxy_server
    except Exception:  # noqa: BLE001 - no proxy extras: nothing to read
        return []
    router = getattr(proxy_server, "llm_router", None)
    model_list = getattr(router, "model_list", None)
    return list(model_list) if isinstance(model_list, list) else []
