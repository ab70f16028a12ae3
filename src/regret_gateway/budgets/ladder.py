"""The ladder a budgeted team is steered on (:mod:`regret_gateway.budgets`): its rungs, dearest first, and
what a position on it means.

A rung is a tier's policy (its exploration included), one model, or "the cheapest model" (the model the
store's last week says costs least, resolved where the request is routed). A position u = j + s routes
to rung j with probability 1 - s and to rung j + 1 with s, so spend moves smoothly with u.

Two ladders:

* :func:`tier_ladder`, the default: the configured tiers by lambda, then the cheapest model. Where the
  active router publishes it with each rung's estimated cost and quality on the team's traffic, a rung that
  another rung costing no more, or a mix of two costing the same, beats with confidence (or that one
  further down serves exactly) is left out (:meth:`Ladder.undominated`; the budget's ``drop_dominated``):
  a team is not steered up to a dearer tier that the logs show to be worse.
* :func:`frontier_ladder`, what retrain publishes for a budgeted team (:class:`BudgetLadders`,
  :mod:`regret_gateway.retrain.frontier`): from the candidates' estimated cost and quality per request on
  the team's traffic (each tier's policy and each model, valued off-policy on the logs), the vertices of
  their upper concave hull from the best to the cheapest -- so a mix of two neighbouring rungs is the best
  quality the logs know of at its cost, not a mix of two tiers that may both serve the same model.

A rung's lambda is the price of a dollar at which the ladder reaches it: a tier's own; on the frontier,
the slope of the hull's segment above it (the lambda at which it and the dearer rung are worth the same).
A position's lambda interpolates them; it is logged with each decision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from regret_gateway.config import Settings

CHEAPEST = "cheapest"  # the kind of the rung whose model is found where the request is routed


@dataclass(frozen=True)
class Rung:
    """One rung: ``kind`` "tier" (``name`` a tier), "model" (``name`` a model) or :data:`CHEAPEST`."""

    kind: str
    name: str
    lam: float
    usd: float | None = None  # expected cost per request on the team's traffic, where estimated
    quality: float | None = None  # expected quality per request, where estimated
    dominated: bool = False  # a rung (or mix of two) that costs no more is confidently better, or the same further down

    @property
    def label(self) -> str:
        return {"tier": f"tier {self.name}", "model": f"model {self.name}"}.get(self.kind, "the cheapest model")


def split_position(position: float, top: int) -> tuple[int, float]:
    """(j, s): a ladder position is rung j with probability 1 - s and rung j + 1 with s (j <= ``top``, the
    last rung; s = 0 there)."""
    j = min(int(math.floor(position)), top)
    return j, 0.0 if j == top else float(position - j)


@dataclass(frozen=True)
class Ladder:
    """A team's rungs, dearest first."""

    rungs: tuple[Rung, ...]

    def __post_init__(self) -> None:
        if not self.rungs:
            raise ValueError("a ladder needs at least one rung")

    @property
    def top(self) -> int:
        """The last rung's index: positions lie in [0, top]."""
        return len(self.rungs) - 1

    def split(self, position: float) -> tuple[int, float]:
        return split_position(position, self.top)

    def lam(self, position: float) -> float:
        """The lambda a position stands for: its rungs' lambdas interpolated."""
        j, s = self.split(position)
        return float(self.rungs[j].lam) if s == 0 else float((1 - s) * self.rungs[j].lam + s * self.rungs[j + 1].lam)

    def at_lam(self, lam: float) -> float:
        """The first position whose lambda is ``lam`` (the rungs' lambdas ascend): where a team at a tier of
        that lambda starts; an end of the ladder past its lambdas."""
        lams = [r.lam for r in self.rungs]
        if lam <= lams[0]:
            return 0.0
        for j in range(self.top):
            if lams[j] <= lam <= lams[j + 1]:
                return float(j) if lams[j + 1] == lams[j] else float(j + (lam - lams[j]) / (lams[j + 1] - lams[j]))
        return float(self.top)

    def describe(self, position: float) -> str:
        """Where a position routes, in words: ``tier standard``, ``70% tier standard / 30% model m``."""
        j, s = self.split(position)
        if s < 0.005:
            return self.rungs[j].label
        return f"{100 * (1 - s):.0f}% {self.rungs[j].label} / {100 * s:.0f}% {self.rungs[j + 1].label}"

    def start(self, budget_usd: float, expected_requests: float) -> float | None:
        """Where a period starts from the rungs' forecast costs: the dearest position whose cost per request
        spends at most ``budget_usd`` over ``expected_requests`` (a position between two rungs costs the mix
        of theirs; the cheapest end if none does); None without expected requests or forecast costs."""
        costs = [r.usd for r in self.rungs]
        if expected_requests <= 0 or any(c is None for c in costs):
            return None
        affordable = budget_usd / expected_requests
        for j, cost in enumerate(costs):
            assert cost is not None
            if cost <= affordable:
                if j == 0:
                    return 0.0
                dearer = costs[j - 1]  # > affordable: the mix of rungs j - 1 and j that costs exactly that
                assert dearer is not None
                return float(j - 1 + (dearer - affordable) / (dearer - cost)) if dearer > cost else float(j)
        return float(self.top)

    def undominated(self) -> "Ladder":
        """The ladder without its rungs flagged ``dominated`` (:func:`regret_gateway.retrain.frontier.ladders`
        flags them), in the same order; itself where none is, or every one is."""
        kept = tuple(r for r in self.rungs if not r.dominated)
        return Ladder(kept) if kept and len(kept) < len(self.rungs) else self

    def to_json(self) -> list[dict]:
        return [asdict(r) for r in self.rungs]

    @classmethod
    def from_json(cls, rungs: Sequence[dict]) -> "Ladder":
        return cls(tuple(Rung(**r) for r in rungs))


LADDER_KINDS = ("frontier", "tiers")  # the ladders retrain publishes for budgeted teams
EVERYONE = "*"  # the team key of the ladder of every held-out request (a team retrain did not value gets it)


@dataclass(frozen=True)
class BudgetLadders:
    """The ladders a published router carries for budgeted teams: per kind (:data:`LADDER_KINDS`: the
    frontier, and the tiers' ladder with forecast costs and dominated rungs flagged) a ladder per team,
    ``"*"`` (:data:`EVERYONE`) for the others."""

    frontier: Mapping[str, Ladder] = field(default_factory=dict)
    tiers: Mapping[str, Ladder] = field(default_factory=dict)

    def of(self, team: str, kind: str) -> Ladder | None:
        """``team``'s ladder of ``kind``, else everyone's; None where none is published."""
        if kind not in LADDER_KINDS:
            raise ValueError(f"a ladder's kind is one of {LADDER_KINDS}, got {kind!r}")
        published: Mapping[str, Ladder] = getattr(self, kind)
        return published.get(team) or published.get(EVERYONE)

    def to_json(self) -> dict[str, dict[str, list[dict]]]:
        return {kind: {team: ladder.to_json() for team, ladder in getattr(self, kind).items()} for kind in LADDER_KINDS}

    @classmethod
    def from_json(cls, tree: Mapping[str, Mapping[str, Sequence[dict]]]) -> "BudgetLadders":
        return cls(**{kind: {str(team): Ladder.from_json(rungs) for team, rungs in (tree.get(kind) or {}).items()}
                      for kind in LADDER_KINDS})  # fmt: skip


def tier_ladder(settings: Settings, usd: Sequence[float] | None = None) -> Ladder:
    """The default ladder: the tiers by lambda (each with its exploration), then the cheapest model (at the
    highest tier's lambda); ``usd``: each rung's forecast cost per request, where known."""
    tiers = settings.tiers_by_lambda()
    rungs = [Rung("tier", name, spec.lam) for name, spec in tiers] + [Rung(CHEAPEST, "", tiers[-1][1].lam)]
    if usd is not None:
        rungs = [Rung(r.kind, r.name, r.lam, float(c)) for r, c in zip(rungs, usd)]
    return Ladder(tuple(rungs))


def frontier_ladder(candidates: Sequence[Rung]) -> Ladder:
    """The upper concave hull of the candidates' (cost, quality), from the best (the cheapest of the best on a
    tie) to the cheapest (the best of the cheapest on a tie): a candidate that a mix of two others beats on
    both is left out. Each rung's lambda is the slope of the segment above it (the dearest rung: 0)."""
    points = [c for c in candidates if c.usd is not None and c.quality is not None]
    if not points:
        raise ValueError("the frontier needs candidates with an estimated cost and quality")
    # by cost ascending, the better first on a tie: keep the best of each cost
    points.sort(key=lambda c: (c.usd, -c.quality))  # type: ignore[operator]
    hull: list[Rung] = []
    for c in points:
        if hull and c.usd == hull[-1].usd:
            continue  # the same cost, no better
        if hull and c.quality <= hull[-1].quality:  # type: ignore[operator]
            continue  # dearer and no better: dominated
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], c) >= 0:
            hull.pop()  # hull[-1] lies on or under the segment from hull[-2] to c
        hull.append(c)
    hull.reverse()  # dearest (best) first
    rungs = [Rung(hull[0].kind, hull[0].name, 0.0, hull[0].usd, hull[0].quality)]
    for above, r in zip(hull, hull[1:]):
        slope = (above.quality - r.quality) / (above.usd - r.usd)  # type: ignore[operator]
        rungs.append(Rung(r.kind, r.name, float(slope), r.usd, r.quality))
    return Ladder(tuple(rungs))


def _cross(a: Rung, b: Rung, c: Rung) -> float:
    """> 0 where b lies under the segment a -> c (cost on x, quality on y; a, b, c by cost ascending)."""
    return (b.usd - a.usd) * (c.quality - a.quality) - (b.quality - a.quality) * (c.usd - a.usd)  # type: ignore[operator]


def cheapest_model(costs: dict[str, float], models: list[str]) -> str | None:
    """The model of ``costs`` (:func:`regret_gateway.store.steering.model_costs`) that costs least (the first configured on a tie)."""
    return min(costs, key=lambda m: (costs[m], models.index(m))) if costs else None
