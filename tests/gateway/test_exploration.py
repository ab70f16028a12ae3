"""Exploration by inverse gap weighting: exact propensities, a floor on every model, and exploration
spent on the models the router's estimates say are close to its choice, less as they separate."""

from __future__ import annotations

import numpy as np
import pytest

from regret_gateway.gateway.decisions import exploration_distribution
from tests.gateway.conftest import CODE_PROMPT, MODELS, TRANSLATE_PROMPT


def test_igw_explores_at_most_epsilon_near_ties_most_and_every_model_above_the_floor():
    u = np.array([0.80, 0.79, 0.50, 0.10, -0.40, 0.78, 0.20, 0.0, 0.3])
    p = exploration_distribution(0, 9, 0.1, utilities=u, gamma=50.0, min_propensity=0.0005)
    assert p.sum() == pytest.approx(1.0) and p[0] == pytest.approx(1 - p[1:].sum()) and p[0] > 0.9
    assert p.min() == pytest.approx(0.0005)  # the floor: the importance weight 1/p is at most 2,000
    # nearer the choice -> explored more: model 1 (gap 0.01) > model 5 (0.02) > model 2 (0.30) > model 4 (1.2)
    assert p[1] > p[5] > p[2] > p[4]
    assert p[1] == pytest.approx(0.1 / 8 / 1.5)  # epsilon / (T - 1) / (1 + gamma * gap)
    # the default floor: a quarter of epsilon / (T - 1), so one model's exploration weights differ by <= 4x
    assert exploration_distribution(0, 9, 0.1, utilities=u, gamma=50.0).min() == pytest.approx(0.1 / 8 / 4)
    # where every model looks as good as the choice, epsilon is spent in full, evenly
    assert np.allclose(exploration_distribution(0, 9, 0.1, utilities=np.full(9, 0.5))[1:], 0.1 / 8)


def test_igw_without_estimates_or_with_equal_gaps_spreads_evenly_and_floor_is_capped():
    p = exploration_distribution(2, 5, 0.2, utilities=None, min_propensity=0.9)  # floor above epsilon/(T-1): capped
    assert np.allclose(np.delete(p, 2), 0.05) and p[2] == pytest.approx(0.8)
    assert np.array_equal(exploration_distribution(1, 4, 0.0, utilities=np.zeros(4)), [0, 1, 0, 0])
    # a model the estimator rates above the router's choice has gap 0: the most exploration
    p = exploration_distribution(0, 3, 0.1, utilities=np.array([0.5, 0.9, 0.0]), gamma=50.0)
    assert p[1] > p[2]


def test_challengers_share_what_igw_leaves_of_epsilon():
    """The models the estimates rank above the served choice (model 0, a constant) are explored at about
    epsilon / 2 each instead of epsilon / (T - 1); the rest keep their IGW shares; epsilon in all."""
    u = np.array([0.60, 0.70, 0.65, 0.10, -0.40, 0.20, 0.0, 0.3, 0.59])
    igw = exploration_distribution(0, 9, 0.1, utilities=u, gamma=50.0)
    p = exploration_distribution(0, 9, 0.1, rule="challengers", utilities=u, gamma=50.0)
    assert p.sum() == pytest.approx(1.0) and p[0] == pytest.approx(0.9)  # epsilon is spent in full
    assert np.allclose(p[3:], igw[3:]) and p[1] == p[2] == pytest.approx((0.1 - igw[3:].sum()) / 2)
    assert p[1] > 3 * igw[1]  # the gate's comparison with model 1 gets rows at weight ~26, not 80
    # where the router's choice is the estimates' best, nothing is ahead of it: plain IGW
    assert np.allclose(
        exploration_distribution(1, 9, 0.1, rule="challengers", utilities=u), exploration_distribution(1, 9, 0.1, utilities=u)
    )


def test_a_tier_s_lead_contender_gets_what_igw_leaves_of_epsilon_where_the_estimates_rank_it_low():
    """The gate's lead contender (of the models its logs could not show to be worse than the served constant,
    the one with the most room to gain) gets what IGW leaves of epsilon though the estimates rank it far
    below the choice -- it would otherwise draw the floor's share, a few rows a round -- under igw and
    challengers alike; the other contenders and models keep their IGW shares; a lead that is the choice
    itself passes the lead to the next; without contenders it is IGW."""
    u = np.array([0.60, 0.10, 0.65, 0.10, -0.40, 0.20, 0.0, 0.3, 0.59])
    igw = exploration_distribution(0, 9, 0.1, utilities=u, gamma=50.0)
    p = exploration_distribution(0, 9, 0.1, utilities=u, gamma=50.0, contenders=[4, 1])
    assert p.sum() == pytest.approx(1.0) and p[0] == pytest.approx(0.9)  # epsilon is spent in full
    rest = np.ones(9, dtype=bool)
    rest[[0, 4]] = False
    assert np.allclose(p[rest], igw[rest]) and p[4] == pytest.approx(0.1 - igw[rest].sum())
    assert p[4] > 20 * igw[4] and p[1] == igw[1]  # the lead gets epsilon's worth, the second contender waits
    # the served model itself is never its own contender: the next one leads
    assert np.allclose(exploration_distribution(0, 9, 0.1, utilities=u, gamma=50.0, contenders=[0, 1, 4]),
                       exploration_distribution(0, 9, 0.1, utilities=u, gamma=50.0, contenders=[1]))  # fmt: skip
    both = exploration_distribution(0, 9, 0.1, rule="challengers", utilities=u, gamma=50.0, contenders=[1])
    assert both[2] > igw[2] and both[1] > igw[1]  # ranked above the choice (2) and leading (1): both share
    assert np.allclose(exploration_distribution(0, 9, 0.1, utilities=u, contenders=()), igw)


def test_the_gateway_explores_the_contenders_the_published_router_names(trained_learner, encoder, tmp_path):
    """A published router whose tier names a contender, saved and loaded as the gateway loads it: the
    gateway's draws give the contender what IGW leaves of epsilon, with the exact propensity logged."""
    from regret_gateway.artifacts import load_artifact, save_artifact
    from regret_gateway.config import Settings, TierSpec
    from regret_gateway.gateway.decisions import ActiveRouter
    from regret_gateway.servable import Candidate, ConstantPolicy, PublishedRouter, ServedTier

    estimator = trained_learner.nuisance_.outcome_.to_policy(MODELS)
    served = ServedTier(0.0, Candidate("constant", MODELS[0]), ConstantPolicy(MODELS, MODELS[0]), (MODELS[2],))
    path = save_artifact(tmp_path, router=PublishedRouter({"t": served}, estimator), embedder={"model": "m"}, version="v1")
    loaded = load_artifact(path, models=MODELS)
    assert loaded.router.tier("t").contenders == (MODELS[2],)
    tier = TierSpec(lam=0.0, epsilon=0.2, igw_gamma=50.0)
    active = ActiveRouter(Settings(models=MODELS, default_tier="t", tiers={"t": tier}))
    active.active.artifact = loaded
    x = encoder([CODE_PROMPT])[0]
    u = estimator.utility_estimates(x[None, :], 0.0)[0]
    expected = exploration_distribution(0, 3, 0.2, utilities=u, gamma=50.0, contenders=[2])
    rng = np.random.default_rng(4)
    choices = [active.choose(x, "t", rng) for _ in range(4000)]
    assert all(c.propensity == pytest.approx(expected[MODELS.index(c.model)]) for c in choices[:200])
    shares = np.bincount([MODELS.index(c.model) for c in choices], minlength=3) / len(choices)
    assert np.allclose(shares, expected, atol=0.02) and expected[2] == pytest.approx(0.2 - expected[1])


def test_uniform_rule_is_epsilon_greedy():
    p = exploration_distribution(1, 4, 0.2, rule="uniform", utilities=np.array([0.0, 1.0, 0.0, 0.0]))
    assert np.allclose(p, [0.05, 0.85, 0.05, 0.05])
    with pytest.raises(ValueError, match="exploration rule"):
        exploration_distribution(1, 4, 0.2, rule="softmax")


def test_igw_exploration_costs_less_than_uniform_with_noisy_estimates():
    """With estimates that are only roughly right, the utility IGW gives up to explore (against serving the
    router's choice) is a fraction of uniform epsilon's at the same epsilon, and no propensity falls below
    the floor."""
    rng = np.random.default_rng(0)
    T, eps, floor = 9, 0.1, 0.002
    true = rng.uniform(0.2, 0.9, size=(500, T))
    est = true + rng.normal(0, 0.05, size=true.shape)
    cost = {"igw": [], "uniform": []}
    for u, e in zip(true, est):
        b = int(e.argmax())
        for rule in cost:
            p = exploration_distribution(b, T, eps, rule=rule, utilities=e, min_propensity=floor)
            assert p.min() >= floor - 1e-12
            cost[rule].append(u[b] - p @ u)
    assert np.mean(cost["igw"]) < 0.5 * np.mean(cost["uniform"])  # measured: 0.18x at gamma 50


def test_gateway_logs_the_exact_igw_propensity_of_each_choice(trained_learner, encoder):
    """A per-tier artifact with an estimator: the chosen model's logged propensity is the probability it
    had, every model's probability is logged beside it, and the empirical shares over many draws match them."""
    from regret_gateway.artifacts import RouterArtifact
    from regret_gateway.config import Settings, TierSpec
    from regret_gateway.gateway.decisions import ActiveRouter
    from regret_gateway.servable import PublishedRouter

    estimator = trained_learner.nuisance_.outcome_.to_policy(MODELS)
    policy = trained_learner.policy_.to_policy()
    tier = TierSpec(lam=1000.0, epsilon=0.3, igw_gamma=20.0, min_propensity=0.01)
    active = ActiveRouter(Settings(models=MODELS, default_tier="t", tiers={"t": tier}))
    active.active.artifact = RouterArtifact(
        "v", PublishedRouter.serving(policy, {"t": 1000.0}, estimator=estimator), {"model": "m"}
    )
    for prompt in (CODE_PROMPT, TRANSLATE_PROMPT):
        x = encoder([prompt])[0]
        u = estimator.utility_estimates(x[None, :], 1000.0)[0]
        best = int(np.argmax(policy.logits(x[None, :], 1000.0)[0]))
        expected = exploration_distribution(best, 3, 0.3, utilities=u, gamma=20.0, min_propensity=0.01)
        rng = np.random.default_rng(1)
        choices = [active.choose(x, "t", rng) for _ in range(6000)]
        for c in choices[:200]:
            assert c.propensity == pytest.approx(expected[MODELS.index(c.model)])
            assert (c.mode == "policy") == (c.model == MODELS[best])
            # and the whole distribution it was drawn from, which retrain's off-policy weights read
            assert c.propensities == pytest.approx(dict(zip(MODELS, expected)))
        shares = np.bincount([MODELS.index(c.model) for c in choices], minlength=3) / len(choices)
        assert np.allclose(shares, expected, atol=0.02)
        assert not np.allclose(expected[np.arange(3) != best], 0.15)  # the gaps, not an even split, set the shares


def test_a_configured_model_the_router_has_not_learned_is_explored_most(trained_learner, encoder):
    """A model added to `models` after the artifact was trained: gap 0, so it gets the most exploration."""
    from regret_gateway.artifacts import RouterArtifact
    from regret_gateway.config import Settings, TierSpec
    from regret_gateway.gateway.decisions import ActiveRouter
    from regret_gateway.servable import PublishedRouter

    estimator = trained_learner.nuisance_.outcome_.to_policy(MODELS)
    policy = trained_learner.policy_.to_policy()
    models = (*MODELS, "new-model")
    tier = TierSpec(lam=0.0, epsilon=0.2, igw_gamma=50.0)
    active = ActiveRouter(Settings(models=models, default_tier="t", tiers={"t": tier}))
    active.active.artifact = RouterArtifact("v", PublishedRouter.serving(policy, {"t": 0.0}, estimator=estimator), {"model": "m"})
    rng = np.random.default_rng(2)
    choices = [active.choose(encoder([CODE_PROMPT])[0], "t", rng) for _ in range(3000)]
    explored = [c for c in choices if c.mode == "exploration"]
    counts = {m: sum(c.model == m for c in explored) for m in models}
    assert max(counts, key=lambda m: counts[m]) == "new-model"


@pytest.mark.parametrize("rule", ["igw", "uniform"])
def test_a_fallback_cold_start_explores_at_the_tiers_epsilon(encoder, rule):
    """``cold_start: fallback`` serves each tier's fallback before any router, but a share epsilon of the
    traffic goes to the other models with its exact propensity: otherwise every logged row is the fallback at
    propensity 1, and retrain could never learn another model (it refuses such logs). With epsilon 0 the
    fallback is served alone."""
    from regret_gateway.config import Settings, TierSpec
    from regret_gateway.gateway.decisions import ActiveRouter

    tiers = {"t": TierSpec(lam=0.0, epsilon=0.2, exploration=rule, fallback="large"),
             "fixed": TierSpec(lam=0.0, epsilon=0.0, fallback="large")}  # fmt: skip
    active = ActiveRouter(Settings(models=MODELS, default_tier="t", tiers=tiers, cold_start="fallback"))
    x, rng = encoder([CODE_PROMPT])[0], np.random.default_rng(0)
    choices = [active.choose(x, "t", rng) for _ in range(4000)]
    expected = exploration_distribution(MODELS.index("large"), len(MODELS), 0.2, rule=rule)
    shares = np.array([np.mean([c.model == m for c in choices]) for m in MODELS])
    assert np.allclose(shares, expected, atol=0.02) and (shares > 0).all()
    assert all(c.mode == "cold_start" and c.propensity == pytest.approx(expected[MODELS.index(c.model)]) for c in choices)
    fixed = [active.choose(x, "fixed", rng) for _ in range(50)]
    assert {(c.model, c.propensity) for c in fixed} == {("large", 1.0)}
