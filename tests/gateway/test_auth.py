"""Team identity without LiteLLM's database (``custom_auth`` over ``api_keys``), without the proxy: a team key
names its team and reaches the inference routes and /regret/* only; the master key is the admin; anything
else is 401."""

import asyncio
from types import SimpleNamespace

import numpy as np
import pytest
from fastapi import HTTPException
from litellm.proxy._types import LitellmUserRoles

from regret_gateway.config import Settings
from regret_gateway.gateway.auth import team_may_call, user_api_key_auth
from regret_gateway.gateway.runtime import Gateway


@pytest.fixture
def request_to(tmp_path, monkeypatch):
    monkeypatch.setenv("LITELLM_MASTER_KEY", "sk-master")
    monkeypatch.setenv("SUPPORT_KEY", "sk-support-from-env")
    settings = Settings(models=("a", "b"), default_tier="t", tiers={"t": {"lam": 1.0}}, embedder={"model": "m"},
                        api_keys={"sk-research": "research", "os.environ/SUPPORT_KEY": "support"},
                        store={"url": f"sqlite:///{tmp_path}/gw.db", "spill_dir": str(tmp_path / "spill")})  # fmt: skip
    gateway = Gateway(settings, encode=lambda texts: np.ones((len(texts), 4), dtype=np.float32))

    def request(path: str):
        return SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(regret_gateway=gateway)), url=SimpleNamespace(path=path))

    return request


def auth(request, key: str):
    return asyncio.run(user_api_key_auth(request, key))


def test_a_team_key_names_its_team_and_the_master_key_is_the_admin(request_to):
    assert auth(request_to("/chat/completions"), "Bearer sk-research").team_id == "research"
    assert auth(request_to("/v1/chat/completions"), "sk-support-from-env").team_id == "support"  # a key read from the env
    admin = auth(request_to("/model/info"), "Bearer sk-master")
    assert admin.user_role == LitellmUserRoles.PROXY_ADMIN and admin.team_id is None


@pytest.mark.parametrize("key", ["", "Bearer ", "sk-unknown", "os.environ/SUPPORT_KEY"])
def test_an_unknown_or_missing_key_is_401(request_to, key):
    with pytest.raises(HTTPException) as info:
        auth(request_to("/chat/completions"), key)
    assert info.value.status_code == 401


@pytest.mark.parametrize("path", ["/model/info", "/key/generate", "/team/new", "/settings", "/debug/asyncio-tasks", "/routes"])
def test_a_team_key_may_not_call_an_admin_route(request_to, path):
    with pytest.raises(HTTPException) as info:
        auth(request_to(path), "sk-research")
    assert info.value.status_code == 403 and path in info.value.detail


def test_the_routes_a_team_may_call():
    allowed = ["/chat/completions", "/v1/completions", "/v1/embeddings", "/models", "/regret/feedback",
               "/regret/decisions/rg-1", "/openai/deployments/regret-router/chat/completions"]  # fmt: skip
    denied = ["/regret", "/chat/completions/extra", "/openai/deployments/x/files", "/v1/models/../key/generate/x", "/"]
    assert all(team_may_call(p) for p in allowed) and not any(team_may_call(p) for p in denied)


def litellm_route_check(route: str, role: LitellmUserRoles | None):
    """LiteLLM's own route check for a non-admin virtual key as its database holds one: a generated team id,
    the team's alias, no ``allowed_routes``."""
    from litellm.proxy._types import UserAPIKeyAuth
    from litellm.proxy.auth.route_checks import RouteChecks
    from starlette.requests import Request

    key = UserAPIKeyAuth(token="88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b",
                         team_id="5f8e1c2a-team-uuid", team_alias="research", user_role=role)  # fmt: skip
    request = Request({"type": "http", "method": "POST", "path": route, "headers": [], "query_string": b""})
    user = None if role is None else SimpleNamespace(user_role=role.value, user_id="u-1", organization_memberships=None)
    RouteChecks.non_proxy_admin_allowed_routes_check(user_obj=user, _user_role=role, route=route, request=request,
                                                     valid_token=key, request_data={})  # fmt: skip


@pytest.mark.parametrize("role", [None, LitellmUserRoles.INTERNAL_USER])
@pytest.mark.parametrize("route", ["/regret/feedback", "/regret/feedback/batch", "/regret/decisions/rg-0123", "/regret/budget"])
def test_litellms_route_check_lets_a_database_teams_key_reach_its_regret_routes(route, role):
    """Under LiteLLM's database auth a team's virtual key is refused on any route LiteLLM does not know unless
    the key lists it in ``allowed_routes``: once the gateway started, the routes a team calls pass (each
    handler checks the team itself), and the admin's stay refused to a team key."""
    from regret_gateway.gateway.auth import allow_team_routes

    allow_team_routes()
    litellm_route_check(route, role)
    with pytest.raises(Exception, match="Only proxy admin"):  # LiteLLM answers it 401
        litellm_route_check("/regret/stats", role)


def test_a_database_team_is_named_by_its_alias_where_the_config_names_it_so():
    """LiteLLM's database generates team ids; the config's ``teams:`` may name a team by its alias (or id)."""
    from regret_gateway.gateway.tiers import resolve_tier, team_of

    settings = Settings(models=("a", "b"), default_tier="std", tiers={"std": {"lam": 1.0}, "premium": {"lam": 0.0}},
                        teams={"research": {"tier": "premium"}, "7c1e-id": {"tier": "std"}}, embedder={"model": "m"})  # fmt: skip
    db_key = SimpleNamespace(team_id="5f8e-generated", team_alias="research")
    assert team_of(settings, db_key) == "research" and resolve_tier(settings, team_of(settings, db_key)) == "premium"
    assert team_of(settings, SimpleNamespace(team_id="7c1e-id", team_alias="research")) == "7c1e-id"  # the id first
    assert team_of(settings, SimpleNamespace(team_id="5f8e-generated", team_alias="unknown")) == "5f8e-generated"
    assert team_of(settings, SimpleNamespace(team_id="research")) == "research"  # custom_auth's team names
