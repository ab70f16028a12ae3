"""Conversations keep their model: which conversation a request belongs to, when a later turn is kept or
routed afresh (a switch must pay for the cache it loses), and that a kept turn is logged as no draw."""

from __future__ import annotations

import numpy as np
import pytest

from regret_gateway.config import SessionSpec
from regret_gateway.gateway.decisions import Choice
from regret_gateway.gateway.sessions import Sessions, Turn, conversation_of, lost_cache_usd, worth_switching
from regret_gateway.limits import ModelInfo

KEY = b"k" * 32
MODELS = ("small-a", "small-b", "large")


def chat(*turns: str, system: str = "You are a helpdesk.") -> list[dict]:
    out = [{"role": "system", "content": system}]
    for i, t in enumerate(turns):
        out.append({"role": "user", "content": t})
        if i < len(turns) - 1:
            out.append({"role": "assistant", "content": f"answer {i}"})
    return out


def test_a_conversation_is_its_team_system_prompt_and_first_turn_or_the_clients_session_id():
    first = conversation_of({"messages": chat("hello")}, {}, "team-a", KEY)
    later = conversation_of({"messages": chat("hello", "and then?")}, {}, "team-a", KEY)
    assert first is not None and later is not None
    assert first.key == later.key and not first.later and later.later and not first.opens and later.opens
    assert conversation_of({"messages": chat("hello", "x")}, {}, "team-b", KEY).key != later.key  # another team
    assert conversation_of({"messages": chat("hi", "x")}, {}, "team-a", KEY).key != later.key  # another first turn
    assert conversation_of({"messages": chat("hello", "x", system="Other")}, {}, "team-a", KEY).key != later.key
    assert conversation_of({"messages": chat("hello", "x")}, {}, "team-a", b"other-key" * 4).key != later.key
    named = conversation_of({"messages": chat("hello"), "litellm_session_id": "s-1"}, {}, "team-a", KEY)
    assert named is not None and named.named and named.opens and named.key.startswith("id:")
    assert conversation_of({"messages": chat("other")}, {"session_id": "s-1"}, "team-a", KEY).key == named.key
    assert conversation_of({"messages": [{"role": "system", "content": "x"}]}, {}, "team-a", KEY) is None


def test_a_switch_pays_for_the_cache_it_loses_and_the_penalty():
    info = ModelInfo(input_cost_per_token=3e-6, cached_input_cost_per_token=0.3e-6)
    assert lost_cache_usd(info, 10_000) == pytest.approx(0.027)
    assert lost_cache_usd(ModelInfo(input_cost_per_token=3e-6), 10_000) == 0.0  # no cached price: nothing to lose
    assert lost_cache_usd(info, None) == 0.0
    assert worth_switching(0.05, 1.0, 0.027, 0.02) and not worth_switching(0.05, 2.0, 0.027, 0.02)
    assert not worth_switching(0.01, 0.0, 0.0, 0.02)  # the penalty alone


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def step(sessions: Sessions, turn: Turn, choice: Choice, u=None, allowed=None, lost=0.0, lam=1.0):
    return sessions.step(turn, choice, models=MODELS, allowed=allowed, utilities=lambda: u, lam=lam, lost_usd=lambda m: lost)


def test_a_later_turn_stays_on_its_conversations_model_unless_a_switch_is_worth_it():
    sessions = Sessions(SessionSpec(switch_penalty=0.02))
    opening, later = Turn("c", False, False), Turn("c", False, True)
    drawn = Choice("small-b", 0.9, "policy", "v1")
    assert step(sessions, opening, drawn) == (drawn, None)  # a lone request: remembered, logged as no turn
    other = Choice("large", 0.05, "exploration", "v1")
    # the router drew large, but its estimates put large 0.01 above small-b: not worth the penalty -> kept, p = 1
    kept, turn = step(sessions, later, other, u=np.array([0.1, 0.50, 0.51]))
    assert turn == "kept" and kept.model == "small-b" and kept.propensity == 1.0 and kept.router_version == "v1"
    # a gain of 0.3 beats the penalty and a lost cache of $0.1 at lambda 1 ...
    switched, turn = step(sessions, later, other, u=np.array([0.1, 0.5, 0.8]), lost=0.1)
    assert (switched, turn) == (other, "rerouted")  # the draw, its propensity exact
    assert sessions.model("c") == "large"  # the conversation is on its new model now
    # ... not a lost cache of $0.3
    assert step(sessions, later, drawn, u=np.array([0.1, 0.8, 0.5]), lost=0.3)[1] == "kept"


def test_a_kept_model_that_cannot_take_the_turn_or_unknown_estimates():
    sessions = Sessions(SessionSpec())
    sessions.remember("c", "small-a")
    later = Turn("c", False, True)
    drawn = Choice("large", 0.9, "policy", "v1")
    # small-a cannot take this turn (its window): routed afresh, whatever switching costs
    assert step(sessions, later, drawn, allowed=np.array([False, True, True]), lost=99.0) == (drawn, "rerouted")
    sessions.remember("c", "small-a")
    # no utility estimates (no router yet, or a policy without them): no switch is shown worth it
    assert step(sessions, later, drawn, u=None)[0].model == "small-a"
    # a fallback (routing failed) is not remembered as the conversation's model
    fresh = Turn("d", True, False)
    assert step(sessions, fresh, Choice("large", 1.0, "fallback", None)) == (Choice("large", 1.0, "fallback", None), "first")
    assert sessions.model("d") is None


def test_conversations_expire_and_the_oldest_go_first():
    clock = Clock()
    sessions = Sessions(SessionSpec(ttl_s=60, max_sessions=2), clock=clock)
    sessions.remember("a", "small-a")
    clock.t = 30
    sessions.remember("b", "small-b")
    sessions.remember("c", "large")  # over max_sessions: "a", the least recently used, goes
    assert sessions.model("a") is None and sessions.model("b") == "small-b" and len(sessions) == 2
    clock.t = 95  # "b" was last used at 30: past its ttl
    assert sessions.model("b") is None and sessions.model("c") is None


def test_keep_false_routes_every_turn_afresh():
    sessions = Sessions(SessionSpec(keep=False))
    sessions.remember("c", "small-a")
    drawn = Choice("large", 0.9, "policy", "v1")
    assert step(sessions, Turn("c", True, True), drawn) == (drawn, None)


def _gateway_with_conversation_on(dear: str, tmp_path, **settings):
    """A started gateway (cold start) whose conversation with team ``t`` is kept on ``dear``, and the later turn."""
    from regret_gateway.config import Settings
    from regret_gateway.gateway.runtime import Gateway

    s = Settings.model_validate({"models": list(MODELS), "default_tier": "std", "teams": {"t": {"tier": "std"}},
                                 "store": {"url": f"sqlite:///{tmp_path}/gw.db", "spill_dir": str(tmp_path / "spill")},
                                 "artifacts_dir": str(tmp_path / "artifacts"), **settings})  # fmt: skip
    gw = Gateway(s, encode=lambda texts: np.ones((len(texts), 4), dtype=np.float32), seed=0, model_list=[]).start()
    data = {"model": s.virtual_model, "messages": chat("hello", "and then?")}
    turn = conversation_of(data, {}, "t", gw.hash_key)
    gw.sessions.remember(turn.key, dear)
    return gw, data


def _route(gw, data) -> dict:
    import asyncio
    from types import SimpleNamespace

    from regret_gateway.gateway.hook import RegretRouterHook

    key = SimpleNamespace(team_id="t", team_metadata=None, user_role=None)
    out = asyncio.run(RegretRouterHook(gw).async_pre_call_hook(key, None, dict(data), "completion"))
    return out["metadata"]["regret_gateway"]


def test_a_tiers_cost_cap_bounds_a_kept_conversation_turn(tmp_path):
    """A conversation kept on a model its tier's cap now excludes (the store has seen what it costs) is routed
    afresh among the models under the cap: the cap bounds every turn, kept or not (cold start included)."""
    gw, data = _gateway_with_conversation_on("large", tmp_path, tiers={"std": {"lam": 0, "max_cost_per_request_usd": 1e-3}})
    try:
        gw.steerer.maybe_step()  # the cap's first step reads the (empty) store: let it land before the costs are set,
        assert gw.steerer.stepped.wait(timeout=30)  # or it would overwrite them mid-test (a step every 300 s after)
        gw.router.costs_seen({"small-a": 1e-5, "small-b": 2e-5, "large": 5e-2}, {})
        routed = [_route(gw, data) for _ in range(10)]
        assert {r["model"] for r in routed} <= {"small-a", "small-b"} and {r["session_turn"] for r in routed} <= {
            "rerouted",
            "kept",
        }
        assert routed[0]["session_turn"] == "rerouted"
    finally:
        gw.close()


def test_a_teams_budget_position_bounds_a_kept_conversation_turn(tmp_path):
    """A team over its budget is steered to the cheapest rung: its conversation kept on the dearest model moves
    there too, instead of spending past the budget on every later turn."""
    gw, data = _gateway_with_conversation_on("large", tmp_path, tiers={"std": {"lam": 0, "fallback": "small-a"}},
                                             teams={"t": {"tier": "std", "budget": {"usd": 1.0, "per": "month"}}})  # fmt: skip
    try:
        gw.steerer.positions["t"] = float(len(gw.steerer.ladder("t").rungs) - 1)  # the last rung: the cheapest model
        routed = [_route(gw, data) for _ in range(5)]
        assert [r["model"] for r in routed] == ["small-a"] * 5 and routed[0]["session_turn"] == "rerouted"
    finally:
        gw.close()


def test_one_teams_burst_of_new_conversations_evicts_its_own_never_another_teams():
    sessions = Sessions(SessionSpec(max_sessions=4), clock=lambda: 0.0)
    sessions.remember("a1", "large", "team-a")
    sessions.remember("a2", "large", "team-a")
    for i in range(10):  # team b opens ten conversations on a worker that keeps four
        sessions.remember(f"b{i}", "small-a", "team-b")
    assert sessions.model("a1") == "large" and sessions.model("a2") == "large"
    assert [sessions.model(f"b{i}") for i in range(10)] == [None] * 8 + ["small-a"] * 2 and len(sessions) == 4


def test_users_of_one_app_who_open_with_the_same_words_are_two_conversations_when_the_client_sends_user():
    same = chat("reset my password", "it did not work")
    alice = conversation_of({"messages": same, "user": "alice"}, {}, "team-a", KEY)
    bob = conversation_of({"messages": same, "user": "bob"}, {}, "team-a", KEY)
    anonymous = conversation_of({"messages": same}, {}, "team-a", KEY)
    assert len({alice.key, bob.key, anonymous.key}) == 3
    assert alice.key == conversation_of({"messages": chat("reset my password"), "user": "alice"}, {}, "team-a", KEY).key


def test_the_outcome_names_the_model_that_answered_after_a_litellm_fallback(tmp_path):
    """Fast (the quick loop; the proxy's own test is slow): the router chose one model, LiteLLM's fallback
    answered from another; the outcome logs the one that answered and what its answer cost, and the decision
    keeps the router's choice."""
    import asyncio

    from sqlalchemy.orm import Session

    from regret_gateway.gateway.hook import RegretRouterHook
    from regret_gateway.store.queries import get_decision

    gw, data = _gateway_with_conversation_on("large", tmp_path, tiers={"std": {"lam": 0}})
    try:
        hook = RegretRouterHook(gw)
        from types import SimpleNamespace

        key = SimpleNamespace(team_id="t", team_metadata=None, user_role=None)
        routed = asyncio.run(hook.async_pre_call_hook(key, None, {"model": gw.settings.virtual_model,
                                                                  "messages": chat("one question")}, "completion"))  # fmt: skip
        meta = routed["metadata"]["regret_gateway"]
        other = next(m for m in MODELS if m != meta["model"])
        slo = {"model_group": other, "response_cost": 0.0042, "prompt_tokens": 7, "completion_tokens": 3}
        kwargs = {"litellm_params": {"metadata": routed["metadata"]}, "standard_logging_object": slo}
        asyncio.run(hook.async_log_success_event(kwargs, None, 0.0, 1.0))
        assert gw.writer.drain(timeout=30)
        with Session(gw.engine) as session:
            stored = get_decision(session, meta["request_id"])
        assert stored.chosen_model == meta["model"] and stored.outcome.answered_model == other
        assert stored.outcome.cost_usd == pytest.approx(0.0042) and stored.outcome.status == "success"
    finally:
        gw.close()
