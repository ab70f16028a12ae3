"""Routing decisions with exact propensities, from the active router version (:mod:`regret_gateway.gateway.active`:
swapped in atomically when a new version is published).

A tier is served by its name from the published router: its policy's argmax, with exploration drawn by
:func:`~regret_gateway.gateway.exploration.exploration_distribution` (``igw``, ``challengers`` or
``uniform``); a tier's cost cap removes the models predicted to cost more (:mod:`regret_gateway.gateway.costs`);
a budgeted team's position on its ladder mixes two rungs (:mod:`regret_gateway.gateway.rungs`). The logged propensity is the exact probability of
the chosen model under what the request was drawn from. Cold start (no router yet): uniform over the models
(p = 1/T), or a configured default model. A tier the published router does not hold (a tier added to the
config since the last retrain) goes to its fallback model (mode ``fallback``) until a retrain publishes a
policy for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from regret_gateway.artifacts import RouterArtifact
from regret_gateway.budgets.ladder import Ladder, tier_ladder
from regret_gateway.config import Settings
from regret_gateway.gateway.active import ActiveVersion
from regret_gateway.gateway.costs import CostCaps
from regret_gateway.gateway.exploration import exploration_distribution
from regret_gateway.gateway.rungs import Distribution, mixed, rung_distribution

if TYPE_CHECKING:
    from regret_gateway.prices import CostLine


@dataclass(frozen=True)
class Choice:
    model: str
    propensity: float
    mode: str  # policy | exploration | cold_start | fallback
    router_version: str | None
    scores: dict[str, float] | None = None
    greedy: str | None = None  # the router's choice before exploration (None: no router chose)
    # every model's probability under the distribution drawn from (its non-zero entries; None: the uniform cold
    # start or one model): what retrain's off-policy weights read of this logger at this request (causal/ope.py)
    propensities: dict[str, float] | None = None


def fallback_model(settings: Settings, tier: str, allowed: np.ndarray | None = None) -> str:
    """The tier's fallback (default: the first model); where ``allowed`` (T,) rules it out, the first of
    ``settings.models`` that it allows."""
    name = settings.fallback_of(tier)
    if allowed is None or allowed[settings.models.index(name)]:
        return name
    return settings.models[int(np.flatnonzero(allowed)[0])]


class ActiveRouter:
    """What the gateway routes with: the active version (``refresh()`` loads a newly activated one; one that
    fails to load is refused with a log line and the current one stays), the cost caps, and per request the
    choice distribution of its tier (or of its team's ladder position) and the draw."""

    def __init__(self, settings: Settings, embedding_dim: int | None = None):
        self.settings = settings
        self.active = ActiveVersion(settings, embedding_dim)
        self.unpublished = 0  # requests of a tier the active router holds no policy for: sent to their fallback
        self.costs = CostCaps(settings)  # the store's cost figures (the gateway's steerer sets them) and the caps

    @property
    def artifact(self) -> RouterArtifact | None:
        return self.active.artifact

    def refresh(self) -> bool:
        """Swap in the version named by ``ACTIVE`` if it is new. Returns True when a swap happened."""
        return self.active.refresh()

    def costs_seen(self, costs: dict[str, float], lines: dict[str, CostLine]) -> None:
        """What the store says each model costs (the steerer's step): the caps' predictions read it."""
        self.costs.seen(costs, lines)

    def predicted_costs(self, artifact: RouterArtifact | None, X: np.ndarray, prompt_tokens: float | None = None,
                        tier: str | None = None) -> np.ndarray:  # fmt: skip
        """(n, T) each configured model's predicted cost (USD) for the requests ``X`` (:class:`CostCaps`)."""
        return self.costs.predicted(artifact, None if artifact is None else self.active.columns(artifact), X, prompt_tokens, tier)

    def utilities(self, x: np.ndarray, tier: str, lam: float) -> np.ndarray | None:
        """(T,) over ``settings.models``: the active router's utility estimates at ``lam`` for one request
        ``x`` (NaN for a model it has not learned); None before any router or where it has none."""
        artifact = self.active.artifact
        if artifact is None or artifact.router.tier(tier) is None:
            return None
        return self._utility_row(artifact, x[None, :], tier, lam)

    def _utility_row(self, artifact: RouterArtifact, X: np.ndarray, tier: str, lam: float) -> np.ndarray | None:
        """(T,) over ``settings.models``: ``artifact``'s utility estimates at ``lam`` for one request ``X`` (1, d),
        NaN for a model it has not learned; None where it has none."""
        estimates = artifact.router.utility_estimates(X, lam, tier)
        if estimates is None:
            return None
        out = np.full(len(self.settings.models), np.nan)
        out[self.active.columns(artifact)] = estimates[0]
        return out

    def _distribution(self, artifact: RouterArtifact | None, X: np.ndarray, tier: str, prompt_tokens: float | None = None,
                      allowed: np.ndarray | None = None) -> tuple[np.ndarray, int, dict | None]:  # fmt: skip
        """(p over ``settings.models``, the router's choice, its scores) of ``tier``'s policy with exploration,
        at the tier's lambda; before any router, the cold start (uniform, or the fallback model); among the
        ``allowed`` models (T,) only, and under the tier's ``max_cost_per_request_usd`` (for a request of
        ``prompt_tokens``: :meth:`CostCaps.under_cap`)."""
        p, best, scores = self._uncapped(artifact, X, tier)
        cap = self.settings.tiers[tier].max_cost_per_request_usd
        if cap is not None:
            columns = None if artifact is None else self.active.columns(artifact)
            allowed = self.costs.under_cap(artifact, columns, X, cap, tier, prompt_tokens, among=allowed)
        return self._restricted(artifact, X, tier, p, best, scores, allowed)

    def _restricted(self, artifact: RouterArtifact | None, X: np.ndarray, tier: str, p: np.ndarray, best: int,
                    scores: dict | None, allowed: np.ndarray | None) -> tuple[np.ndarray, int, dict | None]:  # fmt: skip
        """``p`` with the models ``allowed`` rules out removed: their probability goes to the allowed model the
        router scores highest (ties, as under a constant or before any router: the one the utility estimates at
        the tier's lambda rank first, then the likeliest). Exact: the request is drawn from what is returned."""
        if allowed is None or allowed.all():
            return p, best, scores
        models = self.settings.models
        if artifact is None and self.settings.cold_start == "uniform":  # uniform over the allowed models
            q = allowed / allowed.sum()
            return q, int(np.flatnonzero(allowed)[0]), scores
        if not allowed[best]:
            score = np.full(len(models), -np.inf)
            for m, v in (scores or {}).items():
                score[models.index(m)] = v
            row = None if artifact is None else self._utility_row(artifact, X, tier, self.settings.tiers[tier].lam)
            utility = np.zeros(len(models)) if row is None else np.nan_to_num(row, nan=0.0)
            best = int(max(np.flatnonzero(allowed), key=lambda t: (score[t], utility[t], p[t])))
        q = np.where(allowed, p, 0.0)
        q[best] += 1.0 - q.sum()
        return q, best, scores

    def _uncapped(self, artifact: RouterArtifact | None, X: np.ndarray, tier: str) -> tuple[np.ndarray, int, dict | None]:
        settings = self.settings
        spec = settings.tiers[tier]
        T = len(settings.models)
        if artifact is None:
            if settings.cold_start == "fallback":  # the fallback, with the tier's exploration: the logs learn every model
                best = settings.models.index(fallback_model(settings, tier))
                p = exploration_distribution(best, T, spec.epsilon, rule=spec.exploration, gamma=spec.igw_gamma,
                                             min_propensity=spec.min_propensity)  # fmt: skip
                return p, best, None
            return np.full(T, 1.0 / T), 0, None
        served = artifact.router.tier(tier)
        if served is None:  # not published yet: the tier's fallback (choose() logs it as one)
            best = settings.models.index(fallback_model(settings, tier))
            return np.eye(T)[best], best, None
        if spec.epsilon > 0 and spec.exploration != "uniform":
            logits, estimates = artifact.router.logits_and_utilities(tier, X, spec.lam)
        else:
            logits, estimates = artifact.router.logits(tier, X, spec.lam), None
        logits = logits[0]
        columns = self.active.columns(artifact)
        scores = {m: float(v) for m, v in zip(artifact.model_names, logits)}
        best = int(columns[int(np.argmax(logits))])
        utilities = None
        if estimates is not None:  # a configured model the router has not learned yet: gap 0, explored most
            utilities = np.full(T, np.inf)
            utilities[columns] = estimates[0]
            utilities[~np.isfinite(utilities)] = utilities[best]
        contenders = [settings.models.index(m) for m in served.contenders if m in settings.models]
        p = exploration_distribution(
            best, T, spec.epsilon, rule=spec.exploration, utilities=utilities,
            gamma=spec.igw_gamma, min_propensity=spec.min_propensity, contenders=contenders,
        )  # fmt: skip
        return p, best, scores

    def choose(self, x: np.ndarray, tier: str, rng: np.random.Generator, *, position: float | None = None,
               ladder: Ladder | None = None, cheapest: str | None = None, prompt_tokens: float | None = None,
               allowed: np.ndarray | None = None) -> Choice:  # fmt: skip
        """Route one request of ``tier``. With a budget's ladder ``position`` (:mod:`regret_gateway.budgets.ladder`;
        ``ladder`` default: the tiers by lambda, then the cheapest model), the request goes to rung j =
        floor(position) with probability 1 - s and rung j + 1 with s (s the fraction): a tier's policy with
        its exploration, one model, or ``cheapest`` (default: the tier's fallback). The propensity is the
        mixture's, exact. ``prompt_tokens``: the request's size, which a tier's cost cap reads. ``allowed``
        (T,): the models that can take the request (gateway/eligibility.py; None: all); the draw is among them,
        the propensity exact over them."""
        settings = self.settings
        models = settings.models
        artifact = self.active.artifact
        X = x[None, :]
        free = settings.tiers[tier].max_cost_per_request_usd is None and (allowed is None or bool(allowed.all()))
        if position is None and artifact is None and free and settings.cold_start == "uniform":
            # the uniform cold start as _uncapped gives it, drawn as before distributions existed (a seed's replay unchanged)
            t = int(rng.integers(len(models)))
            return Choice(models[t], 1.0 / len(models), "cold_start", None)
        if position is None and artifact is not None and artifact.router.tier(tier) is None:
            self.unpublished += 1
            return Choice(fallback_model(settings, tier, allowed), 1.0, "fallback", artifact.version)
        p, best, scores = self.distribution(X, tier, position=position, ladder=ladder, cheapest=cheapest, artifact=artifact,
                                            prompt_tokens=prompt_tokens, allowed=allowed)  # fmt: skip
        t = int(np.searchsorted(np.cumsum(p), rng.random(), side="right"))
        t = t if t < len(models) and p[t] > 0 else best  # rounding at the top of the cumulative sum
        mode = "policy" if t == best else "exploration"
        if artifact is None:
            mode = "cold_start"
        greedy = models[best] if artifact is not None else None
        spread = {models[i]: float(p[i]) for i in np.flatnonzero(p > 0)} if p[t] < 1.0 else None
        return Choice(models[t], float(p[t]), mode, getattr(artifact, "version", None), scores, greedy, spread)

    def permitted(self, artifact: RouterArtifact | None, X: np.ndarray, tier: str, *, position: float | None = None,
                  ladder: Ladder | None = None, cheapest: str | None = None,
                  prompt_tokens: float | None = None) -> np.ndarray | None:  # fmt: skip
        """(T,) the models a request of ``tier`` may go to whatever exploration draws: under the tier's cost cap
        (at a budget's ladder ``position``: under the caps of the rungs in effect, or the rung's one model);
        None where that is every model, not exploration's support (a tier without exploration permits every model
        under its cap). What bounds a kept conversation turn as it bounds a new request (``Gateway.session_step``)."""
        models, columns = self.settings.models, None if artifact is None else self.active.columns(artifact)
        every = np.ones(len(models), dtype=bool)

        def under(name: str) -> Distribution:  # a tier rung: its cap's models (a support, not a distribution)
            cap = self.settings.tiers[name].max_cost_per_request_usd
            mask = every if cap is None else self.costs.under_cap(artifact, columns, X, cap, name, prompt_tokens)
            return mask.astype(float), 0, None

        if position is None:
            out = under(tier)[0] > 0
        else:
            steps = ladder or tier_ladder(self.settings)
            j, s = steps.split(position)
            rungs = [steps.rungs[j]] + ([steps.rungs[j + 1]] if s > 1e-9 else [])
            last = cheapest or fallback_model(self.settings, tier)
            out = np.zeros(len(models), dtype=bool)
            for rung in rungs:
                out |= rung_distribution(rung, models, tuple(self.settings.tiers), last, under, tier)[0] > 0
        return None if out.all() else out

    def distribution(self, X: np.ndarray, tier: str, *, position: float | None = None, ladder: Ladder | None = None,
                     cheapest: str | None = None, artifact: RouterArtifact | None = None,
                     prompt_tokens: float | None = None, allowed: np.ndarray | None = None,
                     ) -> tuple[np.ndarray, int, dict | None]:  # fmt: skip
        """(p over ``settings.models``, the most likely choice's index, the scores) for one request ``X`` (1, d)
        of ``tier`` (at a ladder ``position`` where given: :meth:`choose`), under ``artifact`` (default: the
        active one), among the ``allowed`` models (None: all)."""
        artifact = artifact or self.active.artifact
        if position is None:
            return self._distribution(artifact, X, tier, prompt_tokens, allowed)
        p, best, scores = mixed(
            ladder or tier_ladder(self.settings),
            position,
            lambda rung: self._rung(artifact, X, rung, tier, cheapest, prompt_tokens, allowed),
        )
        return self._restricted(artifact, X, tier, p, best, scores, allowed)  # a one-model rung may name a model ruled out

    def rung_distributions(self, X: np.ndarray, tier: str, ladder: Ladder, cheapest: str | None,
                           artifact: RouterArtifact | None = None) -> np.ndarray:  # fmt: skip
        """(rungs, n, T): each request of ``X`` (n, d)'s routing distribution on each rung of ``ladder``; a
        position between two rungs routes by the mix of theirs."""
        artifact = artifact or self.active.artifact
        return np.array([[self._rung(artifact, X[i : i + 1], rung, tier, cheapest)[0] for i in range(len(X))]
                         for rung in ladder.rungs])  # fmt: skip

    def _rung(self, artifact, X, rung, tier: str, cheapest: str | None, prompt_tokens: float | None = None,
              allowed: np.ndarray | None = None) -> Distribution:  # fmt: skip
        """One rung (:func:`~regret_gateway.gateway.rungs.rung_distribution`); ``cheapest`` default: the tier's fallback."""
        return rung_distribution(rung, self.settings.models, tuple(self.settings.tiers), cheapest or fallback_model(self.settings, tier),
                                 lambda name: self._distribution(artifact, X, name, prompt_tokens, allowed), tier)  # fmt: skip
