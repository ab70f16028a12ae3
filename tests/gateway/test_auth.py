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
