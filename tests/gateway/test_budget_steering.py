"""A budgeted team routed on the ladder: between two rungs the request goes to either with the exact
mixture's propensity; the hook steps the team from the store and routes (and logs) at its position."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from regret_gateway.artifacts import RouterArtifact
from regret_gateway.budgets.ladder import BudgetLadders, Ladder, Rung
from regret_gateway.config import Settings
from regret_gateway.gateway.decisions import ActiveRouter, exploration_distribution
from regret_gateway.servable import Candidate, ConstantPolicy, PublishedRouter, ServedTier

MODELS = ("tiny", "small", "large")
TIERS = {"premium": {"lam": 0.0, "epsilon": 0.1, "exploration": "uniform"},
         "economy": {"lam": 1000.0, "epsilon": 0.1, "exploration": "uniform"}}  # fmt: skip


def constants(estimator=None, ladders: BudgetLadders | None = None) -> PublishedRouter:
    """premium serves `large`, economy `small`: each tier a constant."""
    return PublishedRouter({"premium": ServedTier(0.0, Candidate("constant", "large"), ConstantPolicy(MODELS, "large")),
                            "economy": ServedTier(1000.0, Candidate("constant", "small"), ConstantPolicy(MODELS, "small"))},
                           estimator, ladders)  # fmt: skip


def constant_tiers(ladders: BudgetLadders | None = None) -> RouterArtifact:
    return RouterArtifact("v1", constants(ladders=ladders), {"model": "m"})


def routes_by_the_mixture(rung: list[np.ndarray], position: float, **ladder) -> None:
    """At ``position`` a request goes to rung j (of ``rung``'s distributions) or j + 1 in proportion, each
    drawn at the mixture's exact propensity."""
    active = ActiveRouter(Settings(models=MODELS, default_tier="economy", tiers=TIERS))
    active.active.artifact = constant_tiers()
    j = min(int(position), len(rung) - 1)
    s = position - j
    expected = (1 - s) * rung[j] + (s * rung[j + 1] if s > 0 else 0)
    rng = np.random.default_rng(0)
    choices = [active.choose(np.zeros(4, dtype=np.float32), "economy", rng, position=position, **ladder) for _ in range(6000)]
    for c in choices[:100]:
        assert c.propensity == pytest.approx(expected[MODELS.index(c.model)])
    shares = np.bincount([MODELS.index(c.model) for c in choices], minlength=3) / len(choices)
    assert np.allclose(shares, expected, atol=0.02)


@pytest.mark.parametrize("position, cheapest", [(0.3, None), (1.5, "tiny"), (2.0, "tiny"), (0.0, None)])
def test_between_two_rungs_a_request_goes_to_either_with_the_mixtures_exact_propensity(position, cheapest):
    """The tiers' ladder: premium (with its exploration), economy, then the cheapest model."""
    rung = [exploration_distribution(2, 3, 0.1, rule="uniform"), exploration_distribution(1, 3, 0.1, rule="uniform"),
            np.eye(3)[0]]  # fmt: skip
    routes_by_the_mixture(rung, position, cheapest=cheapest)


@pytest.mark.parametrize("position", [0.0, 0.4, 1.0, 1.75, 2.0])
def test_on_a_frontier_ladder_a_model_rung_mixes_with_a_tier_at_the_exact_propensity(position):
    """A published ladder: rung 0 the premium tier (with its exploration), rung 1 the model `small` alone,
    rung 2 `tiny`."""
    ladder = Ladder((Rung("tier", "premium", 0.0), Rung("model", "small", 20.0), Rung("model", "tiny", 80.0)))
    routes_by_the_mixture(
        [exploration_distribution(2, 3, 0.1, rule="uniform"), np.eye(3)[1], np.eye(3)[0]], position, ladder=ladder
    )
    assert ladder.lam(position) == pytest.approx(np.interp(position, [0, 1, 2], [0.0, 20.0, 80.0]))


def test_the_hook_steps_a_spent_team_to_the_cheapest_model_and_logs_its_lambda(tmp_path):
    """Team `a` (economy) has spent its day's budget; the first routed request starts a step in a worker
    thread; once it is done, a's requests go to the cheapest model (measured in the store) with propensity
    1 and log the top tier's lambda, while team `b` (no budget) keeps its tier's routing."""
    from regret_gateway.gateway.hook import RegretRouterHook
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.store.records import DecisionRecord, OutcomeRecord
    from regret_gateway.store.schema import Decision
    from regret_gateway.store.writes import record_decisions

    now = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)
    settings = Settings(
        models=MODELS, default_tier="economy", tiers=TIERS, artifacts_dir=str(tmp_path / "artifacts"),
        embedder={"model": "m"}, store={"url": f"sqlite:///{tmp_path}/gw.db", "spill_dir": str(tmp_path / "spill")},
        teams={"a": {"tier": "economy", "budget": {"usd": 0.05, "per": "day"}}, "b": {"tier": "premium"}},
    )  # fmt: skip
    gateway = Gateway(settings, encode=lambda texts: np.ones((len(texts), 4), dtype=np.float32), seed=0,
                      clock=lambda: now).start()  # fmt: skip
    hook = RegretRouterHook(gateway)
    past = [
        DecisionRecord(
            request_id=f"p{i}",
            tier="economy",
            lam=1000.0,
            embedding_model="m",
            embedding=np.zeros(4, dtype=np.float32),
            chosen_model=m,
            propensity=1 / 3,
            team=t,
            prompt_hash="h",
            created_at=now - timedelta(hours=1),
            outcome=OutcomeRecord(request_id=f"p{i}", cost_usd=c),
        )  # fmt: skip
        for i, (m, t, c) in enumerate([("large", "a", 0.04), ("small", "a", 0.02), ("tiny", "b", 0.0001)])
    ]  # a: $0.06 of $0.05 today; tiny is the cheapest model on record
    with Session(gateway.engine) as s, s.begin():
        record_decisions(s, past)

    async def route(team: str) -> dict:
        key = SimpleNamespace(team_id=team, team_metadata=None, user_role=None)
        data = await hook.async_pre_call_hook(key, None, {"model": "regret-router", "messages": [{"role": "user", "content": "hi"}]},
                                              "completion")  # fmt: skip
        return data["metadata"]["regret_gateway"]

    try:
        asyncio.run(route("a"))  # cold start, unsteered: its step starts now
        assert gateway.steerer.stepped.wait(timeout=30)
        assert gateway.steerer.positions["a"] == 2.0 and gateway.steerer.cheapest == "tiny"
        steered = [asyncio.run(route("a")) for _ in range(20)]
        assert {(m["model"], m["propensity"], m["lam"]) for m in steered} == {("tiny", 1.0, 1000.0)}
        other = [asyncio.run(route("b")) for _ in range(30)]
        assert {m["lam"] for m in other} == {0.0} and len({m["model"] for m in other}) > 1  # uniform cold start
        assert gateway.writer.drain(timeout=10)
        with Session(gateway.engine) as s:
            logged = s.execute(
                select(Decision.chosen_model, Decision.lam).where(Decision.request_id == steered[0]["request_id"])
            ).one()
        assert tuple(logged) == ("tiny", 1000.0)
    finally:
        gateway.close()


def capped_router(estimated_costs: list[float]) -> ActiveRouter:
    """premium ($0.01 per request cap) serves `large`, economy `small`; the router's estimates put each model's
    cost at ``estimated_costs``; 20% uniform exploration on both tiers."""
    from regret_gateway.servable import ClusterPolicy

    estimator = ClusterPolicy(MODELS, np.ones((1, 4)), np.array([[0.3, 0.6, 0.9]]), np.array([estimated_costs]))
    active = ActiveRouter(Settings(models=MODELS, default_tier="premium", tiers=CAPPED))
    active.active.artifact = RouterArtifact("v1", constants(estimator), {"model": "m"})
    return active


CAPPED = {"premium": {"lam": 0.0, "epsilon": 0.2, "exploration": "uniform", "max_cost_per_request_usd": 0.01},
          "economy": {"lam": 1000.0, "epsilon": 0.2, "exploration": "uniform"}}  # fmt: skip


def test_a_tiers_cost_cap_never_routes_a_model_predicted_above_it_exploration_included():
    """premium serves `large`; its cap ($0.01) is below what the router's cost estimates predict for `large`
    ($0.03): every request goes to an allowed model, the policy's share to the allowed model it scores
    highest (`small`), and the propensities are those of the draws. With every model above the cap, the
    cheapest predicted serves; without estimates, the store's mean costs predict."""
    costs = np.array([[0.0001, 0.002, 0.03]])
    active = capped_router(costs[0].tolist())
    tiers = CAPPED
    x, rng = np.ones(4, dtype=np.float32), np.random.default_rng(0)
    assert np.allclose(active.predicted_costs(active.artifact, x[None, :]), costs, rtol=1e-3)  # float32 scores
    choices = [active.choose(x, "premium", rng) for _ in range(3000)]
    assert {c.model for c in choices} == {"tiny", "small"}
    expected = {"tiny": 0.2 / 3, "small": 1 - 0.2 / 3}  # uniform exploration's share of large moves to small
    assert all(c.propensity == pytest.approx(expected[c.model]) for c in choices)
    assert np.mean([c.model == "tiny" for c in choices]) == pytest.approx(0.2 / 3, abs=0.015)
    assert {c.model for c in (active.choose(x, "economy", rng) for _ in range(300))} == set(MODELS)  # no cap there
    tight = Settings(
        models=MODELS, default_tier="premium", tiers={**tiers, "premium": {**tiers["premium"], "max_cost_per_request_usd": 1e-5}}
    )
    capped = ActiveRouter(tight)
    capped.active.artifact = active.artifact
    assert {(c.model, c.propensity) for c in (capped.choose(x, "premium", rng) for _ in range(100))} == {("tiny", 1.0)}
    cold = ActiveRouter(Settings(models=MODELS, default_tier="premium", tiers=tiers))  # no router yet: the store's means
    cold.costs_seen({"tiny": 0.001, "small": 0.005, "large": 0.02}, {})
    assert {c.model for c in (cold.choose(x, "premium", rng) for _ in range(300))} == {"tiny", "small"}


def test_a_cost_cap_reads_the_prompts_size_where_the_store_has_fitted_a_models_cost_line():
    """The router's estimates (from the embedding, blind to a prompt's length) predict $0.002 for `large`
    whatever the prompt. Its cost line in the store (input $10 per million tokens) makes a 200-token prompt
    $0.004, under premium's $0.01 cap, and a 5,000-token one $0.052, over it: only the long prompt is kept
    off `large`, exploration included, at exact propensities."""
    from regret_gateway.prices import CostLine

    active = capped_router([0.0001, 0.001, 0.002])
    active.costs_seen({}, {"large": CostLine(0.002, 1e-5, 500), "tiny": CostLine(1e-4, 0.0, 500)})
    x, rng = np.ones(4, dtype=np.float32), np.random.default_rng(0)
    short = [active.choose(x, "premium", rng, prompt_tokens=200) for _ in range(300)]
    assert {c.model for c in short} == set(MODELS) and {c.model for c in short if c.mode == "policy"} == {"large"}
    long = [active.choose(x, "premium", rng, prompt_tokens=5000) for _ in range(300)]
    assert "large" not in {c.model for c in long}
    expected = {"tiny": 0.2 / 3, "small": 1 - 0.2 / 3}
    assert all(c.propensity == pytest.approx(expected[c.model]) for c in long)
    assert "large" in {c.model for c in (active.choose(x, "premium", rng) for _ in range(300))}  # no size: the estimates


def test_the_hook_counts_a_capped_requests_prompt_tokens_and_the_router_keeps_a_long_one_off_a_dear_model(tmp_path):
    """Through the hook: a tier with a cost cap; the steerer's step fits `large`'s cost line from the store's
    answers ($10 per million prompt tokens); then a short prompt may go to `large`, a long one never does."""
    from regret_gateway.gateway.hook import RegretRouterHook
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.store.records import DecisionRecord, OutcomeRecord
    from regret_gateway.store.writes import record_decisions

    tiers = {"premium": {"lam": 0.0, "epsilon": 0.0, "max_cost_per_request_usd": 0.01}}
    settings = Settings(models=MODELS, default_tier="premium", tiers=tiers, artifacts_dir=str(tmp_path / "artifacts"),
                        embedder={"model": "m"}, cold_start="uniform",
                        store={"url": f"sqlite:///{tmp_path}/gw.db", "spill_dir": str(tmp_path / "spill")})  # fmt: skip
    gateway = Gateway(settings, encode=lambda texts: np.ones((len(texts), 4), dtype=np.float32), seed=0).start()
    hook = RegretRouterHook(gateway)
    answered = [DecisionRecord(request_id=f"p{n}", tier="premium", lam=0.0, embedding_model="m",
                               embedding=np.zeros(4, dtype=np.float32), chosen_model="large", propensity=1 / 3,
                               prompt_hash="h", outcome=OutcomeRecord(f"p{n}", cost_usd=0.002 + 1e-5 * n, prompt_tokens=n))
                for n in range(100, 4000, 100)]  # fmt: skip
    with Session(gateway.engine) as s, s.begin():
        record_decisions(s, answered)

    async def route(text: str) -> str:
        key = SimpleNamespace(team_id=None, team_metadata=None, user_role=None)
        data = await hook.async_pre_call_hook(key, None, {"model": "regret-router", "messages": [{"role": "user", "content": text}]},
                                              "completion")  # fmt: skip
        return data["metadata"]["regret_gateway"]["model"]

    try:
        asyncio.run(route("the first request starts the steerer's step"))
        assert gateway.steerer.stepped.wait(timeout=30) and "large" in gateway.router.costs.cost_lines
        assert "large" in {asyncio.run(route("a short question")) for _ in range(60)}  # the cold start draws every model
        assert "large" not in {asyncio.run(route("word " * 3000)) for _ in range(60)}  # ~3,000 tokens: $0.032 predicted
    finally:
        gateway.close()


def test_a_team_is_steered_on_the_published_frontier_only_where_its_budget_says_so(tmp_path):
    """`budget.ladder: frontier` steps the team on the ladder the active router publishes for it; the default
    (`tiers`) on the tiers' ladder, whatever is published."""
    from regret_gateway.budgets.ladder import tier_ladder
    from regret_gateway.gateway.steering import Steerer
    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.migrate import upgrade

    url = f"sqlite:///{tmp_path}/gw.db"
    upgrade(url)
    budget = {"usd": 1.0, "per": "day"}
    settings = Settings(models=MODELS, default_tier="economy", tiers=TIERS,
                        teams={"f": {"tier": "economy", "budget": {**budget, "ladder": "frontier"}},
                               "t": {"tier": "economy", "budget": budget}})  # fmt: skip
    published = Ladder((Rung("model", "large", 0.0, 0.01, 0.9), Rung("model", "tiny", 40.0, 0.001, 0.5)))
    engine = make_engine(url)
    steerer = Steerer(settings, lambda: engine, ladder_of=lambda team, kind: published if kind == "frontier" else None)
    steerer.step()
    assert steerer.ladder("f") == published and steerer.ladder("t") == tier_ladder(settings)
    assert steerer.positions["f"] == published.at_lam(1000.0) == 1.0  # economy's lambda: past the frontier's last rung
    engine.dispose()


def test_a_tier_the_router_publishes_as_dominated_is_left_off_a_budgeted_teams_ladder(tmp_path):
    """The router publishes the tiers' ladder with premium flagged: economy, at a fifth of its cost, is
    confidently better. A budgeted team (the default) is steered on the ladder without premium: at its top it
    gets economy, never premium's dearer, worse answers; a team whose budget says `drop_dominated: false`
    keeps every tier. The status command reads the same ladder."""
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.gateway.steering import published_ladder

    now = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)
    budget = {"usd": 100.0, "per": "day"}
    settings = Settings(
        models=MODELS, default_tier="economy", tiers=TIERS, artifacts_dir=str(tmp_path / "artifacts"),
        embedder={"model": "m"}, store={"url": f"sqlite:///{tmp_path}/gw.db", "spill_dir": str(tmp_path / "spill")},
        teams={"drop": {"tier": "economy", "budget": budget},
               "keep": {"tier": "economy", "budget": {**budget, "drop_dominated": False}}},
    )  # fmt: skip
    tiers = Ladder((Rung("tier", "premium", 0.0, 0.010, 0.60, dominated=True), Rung("tier", "economy", 1000.0, 0.002, 0.70),
                    Rung("cheapest", "", 1000.0, 0.0001, 0.30)))  # fmt: skip
    artifact = constant_tiers(BudgetLadders(tiers={"*": tiers}))
    gateway = Gateway(settings, encode=lambda texts: np.ones((len(texts), 4), dtype=np.float32), seed=0,
                      clock=lambda: now).start()  # fmt: skip
    try:
        gateway.router.active.artifact = artifact
        gateway.steerer.step()
        dropped, kept = gateway.steerer.ladder("drop"), gateway.steerer.ladder("keep")
        assert [r.label for r in dropped.rungs] == ["tier economy", "the cheapest model"]
        assert kept == tiers
        assert dropped.describe(0.0) == "tier economy" and kept.describe(0.0) == "tier premium"
        assert gateway.steerer.positions == {"drop": 0.0, "keep": 1.0}  # each at economy's lambda on its ladder
        assert published_ladder(artifact, "drop", "tiers", drop_dominated=True) == dropped  # what `status` reads
    finally:
        gateway.close()
