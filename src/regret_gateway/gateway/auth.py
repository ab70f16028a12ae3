"""Team identity for proxies without a database: LiteLLM ``custom_auth`` over the ``api_keys`` map of the
settings (key -> team). Team keys reach the inference routes and ``/regret/*`` only; the rest of the
proxy's routes (model info, settings, debug, management) answer the master key alone. With LiteLLM's own database, virtual keys carry ``team_id`` and this is not used.

    general_settings:
      master_key: os.environ/LITELLM_MASTER_KEY
      custom_auth: regret_gateway.gateway.auth.user_api_key_auth
    regret_gateway:
      api_keys: {sk-research-123: research, sk-support-456: support}
"""

from __future__ import annotations

import os

from fastapi import HTTPException, Request
from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth

from regret_gateway.config import env_var

# What a team key may call: the OpenAI-compatible inference routes and the gateway's own /regret/*.
# LiteLLM's admin and introspection routes (/model/info, /settings, /routes, /debug/..., key and team
# management) answer only the master key.
TEAM_ROUTES = (
    "/chat/completions", "/v1/chat/completions", "/completions", "/v1/completions", "/embeddings", "/v1/embeddings",
    "/models", "/v1/models", "/regret/",
)  # fmt: skip


def team_may_call(path: str) -> bool:
    return any(path == route or (route.endswith("/") and path.startswith(route)) for route in TEAM_ROUTES) or (
        path.startswith("/openai/deployments/") and path.endswith(("/chat/completions", "/completions", "/embeddings"))
    )


def _resolve(value: str) -> str:
    var = env_var(value)
    return value if var is None else os.environ.get(var, "")


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    from regret_gateway.gateway.hook import handler

    gateway = getattr(request.app.state, "regret_gateway", None) or handler.gateway
    key = (api_key or "").removeprefix("Bearer ").strip()
    master = os.environ.get("LITELLM_MASTER_KEY")
    if master and key == master:
        return UserAPIKeyAuth(api_key=key, user_role=LitellmUserRoles.PROXY_ADMIN)
    teams = {_resolve(k): team for k, team in gateway.settings.api_keys.items()}
    team = teams.get(key)
    if not key or team is None:
        raise HTTPException(status_code=401, detail="invalid API key")
    if not team_may_call(request.url.path):
        raise HTTPException(status_code=403, detail=f"a team key may not call {request.url.path} (admin route)")
    return UserAPIKeyAuth(api_key=key, team_id=team)
