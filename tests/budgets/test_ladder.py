"""The ladder a budgeted team is steered on: the frontier of cost and quality keeps only the candidates no
mix of two others beats, from the best to the cheapest, and a position's lambda, words and start follow it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from regret_gateway.budgets.ladder import Ladder, Rung, frontier_ladder


def point(name: str, usd: float, quality: float, kind: str = "model") -> Rung:
    return Rung(kind, name, 0.0, usd, quality)


def test_the_frontier_keeps_the_upper_hull_from_the_best_to_the_cheapest():
    candidates = [
        point("best", 10.0, 0.90),
        point("dear-and-worse", 12.0, 0.80),  # dominated outright
        point("mid", 4.0, 0.80),
        point("under-the-mix", 3.0, 0.60),  # below the segment from mid to cheap: a mix of those beats it
        point("cheap", 1.0, 0.50),
        point("tier premium", 8.0, 0.88, kind="tier"),  # on the hull between best and mid? 0.8 + 4/6 * 0.1 = 0.867 < 0.88
        point("cheap-twin", 1.0, 0.45),  # the same cost, worse
    ]
    ladder = frontier_ladder(candidates)
    assert [r.name for r in ladder.rungs] == ["best", "tier premium", "mid", "cheap"]
    assert ladder.rungs[1].kind == "tier"
    # each rung's lambda: the slope of the segment above it (the price of a dollar at which the two tie)
    assert [r.lam for r in ladder.rungs] == pytest.approx([0.0, 0.02 / 2.0, 0.08 / 4.0, 0.30 / 3.0])
    # no candidate lies above the hull: at its cost, the ladder's mix is at least as good
    for c in candidates:
        q = np.interp(c.usd, [r.usd for r in reversed(ladder.rungs)], [r.quality for r in reversed(ladder.rungs)])
        assert q >= c.quality - 1e-12, c


def test_the_frontier_of_random_points_is_concave_and_covers_them():
    rng = np.random.default_rng(0)
    for trial in range(50):
        cands = [point(f"m{i}", float(rng.uniform(0.1, 10)), float(rng.uniform(0, 1))) for i in range(int(rng.integers(1, 9)))]
        rungs = frontier_ladder(cands).rungs
        usd, q = [r.usd for r in rungs], [r.quality for r in rungs]
        assert all(a > b for a, b in zip(usd, usd[1:])) and all(a > b for a, b in zip(q, q[1:]))
        assert all(a.lam <= b.lam for a, b in zip(rungs, rungs[1:]))  # concave: slopes grow toward the cheap end
        assert rungs[0].quality == max(c.quality for c in cands) and rungs[-1].usd == min(c.usd for c in cands)
        for a, b in itertools.combinations(cands, 2):  # no mix of two candidates beats the hull at its cost
            for s in (0.25, 0.5, 0.75):
                usd_mix, q_mix = s * a.usd + (1 - s) * b.usd, s * a.quality + (1 - s) * b.quality
                hull_q = np.interp(usd_mix, usd[::-1], q[::-1], left=-np.inf, right=q[0])
                assert hull_q >= q_mix - 1e-9, (trial, a, b)


def test_a_position_reads_as_words_lambda_and_start():
    ladder = Ladder((point("big", 0.01, 0.9), Rung("tier", "standard", 10.0, 0.004, 0.8), Rung("cheapest", "", 30.0, 0.001, 0.5)))
    assert ladder.describe(0.0) == "model big" and ladder.describe(2.0) == "the cheapest model"
    assert ladder.describe(1.3) == "70% tier standard / 30% the cheapest model"
    assert ladder.lam(1.5) == pytest.approx(20.0) and ladder.at_lam(20.0) == pytest.approx(1.5) and ladder.at_lam(99) == 2.0
    assert ladder.start(0.7, 100) == pytest.approx(0.5)  # $0.007 a request: halfway between big and standard
    assert Ladder.from_json(ladder.to_json()) == ladder


def test_a_ladder_without_its_dominated_rungs_keeps_the_rest_in_order():
    """The rungs retrain flagged dominated are left out, the others keep their order and lambdas; a ladder
    with none flagged, or every one, is itself."""
    ladder = Ladder((
        Rung("tier", "premium", 0.0, 0.010, 0.70, dominated=True),
        Rung("tier", "standard", 20.0, 0.005, 0.72),
        Rung("tier", "economy", 100.0, 0.001, 0.55, dominated=True),
        Rung("cheapest", "", 100.0, 0.001, 0.55),
    ))  # fmt: skip
    kept = ladder.undominated()
    assert [r.label for r in kept.rungs] == ["tier standard", "the cheapest model"]
    assert [r.lam for r in kept.rungs] == [20.0, 100.0] and kept.at_lam(0.0) == 0.0
    assert Ladder.from_json(ladder.to_json()) == ladder  # the flag is published with the rung
    clean = Ladder(tuple(r for r in ladder.rungs if not r.dominated))
    assert clean.undominated() == clean
    every = Ladder(tuple(Rung(r.kind, r.name, r.lam, r.usd, r.quality, dominated=True) for r in ladder.rungs))
    assert every.undominated() == every
