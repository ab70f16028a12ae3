"""Who may call what.

Proxies without a database: LiteLLM ``custom_auth`` over the ``api_keys`` map of the settings (key ->
team). Team keys reach the inference routes and ``/regret/*`` only; the rest of the proxy's routes (model
info, settings, debug, management) answer the master key alone.

With LiteLLM's own database, virtual keys carry ``team_id`` and ``custom_auth`` is not used. LiteLLM's route
check lets a non-admin key call only the routes it knows (or those listed in the key's ``allowed_routes``);
:func:`allow_team_routes` adds the ``/regret/*`` routes a team calls to the routes LiteLLM leaves to their
own handlers (``LiteLLMRoutes.self_managed_routes``): each handler checks the caller's team itself.

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


# The /regret/* routes a team's key calls (each handler lets a team read and score its own requests only, and
# answers the admin's routes -- stats, metrics, report -- to the proxy admin alone).
TEAM_REGRET_ROUTES = ("/regret/feedback", "/regret/feedback/batch", "/regret/decisions/{request_id}", "/regret/budget")


def allow_team_routes() -> None:
    """Let LiteLLM's route check pass a team's virtual key on :data:`TEAM_REGRET_ROUTES` (idempotent). Without
    it LiteLLM answers 403 unless each key was created with those routes in its ``allowed_routes``."""
    from litellm.proxy._types import LiteLLMRoutes

    managed = LiteLLMRoutes.self_managed_routes.value
    managed.extend(route for route in TEAM_REGRET_ROUTES if route not in managed)


def team_may_call(path: str) -> bool:
    return any(path == route or (route.endswith("/") and path.startswith(route)) for route in TEAM_ROUTES) or (
        path.startswith("/openai/deployments/") and path.endswith(("/chat/completions", "/completions", "/embeddings"))
    )


def _resolve(value: str) -> str:
    var = env_var(value)
    return value if var is None else os.environ.get(var, "")


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    gateway = getattr(request.app.state, "regret_gateway", None)
    if gateway is None:  # the proxy's start-up mounts it (gateway/app.py: mount) before any request
        raise HTTPException(status_code=503, detail="the gateway has not started")
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
