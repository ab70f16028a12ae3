"""The hook's own bookkeeping, without the proxy: a routed request's decision waits for its outcome
event, and the event takes it and logs the outcome the client received."""

import asyncio
from types import SimpleNamespace

import numpy as np

from regret_gateway.config import Settings
from regret_gateway.gateway.hook import RegretRouterHook
from regret_gateway.gateway.runtime import Gateway
from regret_gateway.store.queries import get_decision


def _one_tier_gateway(tmp_path):
    """A gateway of three models on one tier, its hook, a caller without a team, and a one-message request."""
    settings = Settings(models=("a", "b", "c"), default_tier="t", tiers={"t": {"lam": 100.0}},
                        artifacts_dir=str(tmp_path / "artifacts"), embedder={"model": "m"},
                        store={"url": f"sqlite:///{tmp_path}/gw.db", "spill_dir": str(tmp_path / "spill")})  # fmt: skip
    gateway = Gateway(settings, encode=lambda texts: np.ones((len(texts), 8), dtype=np.float32), seed=0)
    key = SimpleNamespace(team_id=None, team_metadata=None, user_role=None)
    return gateway, RegretRouterHook(gateway), key, {"model": "regret-router", "messages": [{"role": "user", "content": "hi"}]}


def test_a_routed_decision_awaits_its_outcome_until_the_success_event(tmp_path):
    gateway, hook, key, request = _one_tier_gateway(tmp_path)

    async def route_and_answer():
        data = await hook.async_pre_call_hook(key, None, request, "completion")
        meta = data["metadata"]["regret_gateway"]
        waiting = hook.awaiting_outcome(meta["request_id"])
        answer = SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content="hello"))])
        event = {"metadata": data["metadata"], "standard_logging_object": {"response_cost": 1e-4}}
        await hook.async_log_success_event(event, answer, None, None)
        return meta, waiting

    try:
        meta, waiting = asyncio.run(route_and_answer())
        assert waiting is not None and waiting.request_id == meta["request_id"] and waiting.chosen_model == meta["model"]
        assert hook.awaiting_outcome(meta["request_id"]) is None  # the outcome came: nothing waits
        assert hook.awaiting_outcome("never-routed") is None
        assert gateway.writer.drain(timeout=10)
        from sqlalchemy.orm import Session

        with Session(gateway.engine) as session:
            stored = get_decision(session, meta["request_id"])
        assert stored is not None and stored.chosen_model == meta["model"]
        assert stored.outcome is not None and stored.outcome.status == "success"  # the outcome was logged
        assert stored.outcome.cost_usd == 1e-4
    finally:
        gateway.close()


def test_a_request_the_proxy_fails_after_its_answer_is_logged_as_a_failure_at_the_answer_s_cost(tmp_path):
    """LiteLLM's success event came (the answer's cost is logged), then the proxy answered the client with an
    error (e.g. its own check of a deployment's model_info): the stored outcome is the failure the client got."""
    gateway, hook, key, request = _one_tier_gateway(tmp_path)

    async def answer_then_fail():
        data = await hook.async_pre_call_hook(key, None, request, "completion")
        answer = SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content="hello"))])
        event = {"metadata": data["metadata"], "standard_logging_object": {"response_cost": 1e-4}}
        await hook.async_log_success_event(event, answer, None, None)
        await hook.async_post_call_failure_hook(data, ValueError("ModelGroupInfo: bad supports_vision"), key)
        return data["metadata"]["regret_gateway"]["request_id"]

    try:
        request_id = asyncio.run(answer_then_fail())
        assert gateway.writer.drain(timeout=10)
        from sqlalchemy.orm import Session

        with Session(gateway.engine) as session:
            outcome = get_decision(session, request_id).outcome
        assert outcome.status == "failure" and "bad supports_vision" in outcome.error
        assert outcome.cost_usd == 1e-4  # the upstream answered and was paid
    finally:
        gateway.close()
