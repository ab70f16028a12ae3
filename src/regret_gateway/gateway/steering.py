"""The gateway's side of budget steering: each budgeted team's ladder position, refreshed from the store.

:class:`Steerer` keeps, per team with a budget, the position its requests are routed at
(:mod:`regret_gateway.budgets`), each model's mean cost per answer and the cheapest model (the ladder's last
rung; the per-request caps' costs where the router has no cost estimates). ``maybe_step()``,
called on the request path, runs a step in a worker thread at most every ``interval_s`` (the smallest
of the teams'): the store takes each team's controller step once per interval for every replica
(:func:`regret_gateway.store.steering.step_team`) and every replica routes at the position it returns.
A team not stepped yet routes at its own tier; a store that fails keeps the last positions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

import numpy as np

from regret_gateway.config import Settings

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Steerer:
    """Per budgeted team, the ladder position its requests are routed at (None: its tier, unsteered)."""

    def __init__(self, settings: Settings, engine_of: Callable[[], object], clock: Callable[[], datetime] = _utcnow,
                 on_costs: Callable[[dict[str, float]], None] | None = None,
                 forecast_of: Callable[[str], list[float] | None] | None = None):  # fmt: skip
        self.settings = settings
        self._engine_of = engine_of  # the gateway's engine, read when a step runs (built at start)
        self._on_costs = on_costs  # told each step's model costs (the router's caps read them)
        self._forecast_of = forecast_of or (lambda team: None)  # the active router's rung costs for a team
        self.clock = clock
        self._lams = [spec.lam for _, spec in settings.tiers_by_lambda()]  # the ladder's tier rungs
        self.teams = sorted(team for team, spec in settings.teams.items() if spec.budget is not None)
        self.interval_s = min((settings.teams[t].budget.interval_s for t in self.teams), default=0.0)  # type: ignore[union-attr]
        self.positions: dict[str, float] = {}
        self.cheapest: str | None = None
        self.model_costs: dict[str, float] = {}  # mean cost per answer (the store's last week): caps without estimates
        capped = any(spec.max_cost_per_request_usd is not None for spec in settings.tiers.values())
        self.active = bool(self.teams) or capped  # anything to step: budgets, or costs for the per-request caps
        if not self.teams and capped:
            self.interval_s = 300.0
        self.steps = 0
        self.auto = True  # maybe_step steps on the request path; the demo's budget days step on their own clock
        self.stepped = threading.Event()  # set after each step (tests wait on it)
        self._busy = threading.Event()
        self._last = -float("inf")

    def position(self, team: str | None, tier: str) -> float | None:
        """Where ``team``'s request for ``tier`` is routed on the ladder: None (the tier itself) unless the
        team has a budget, has been stepped, and the request is for the team's own tier (a request that
        asks for another allowed tier gets that tier)."""
        if team is None or team not in self.positions or self.settings.teams[team].tier != tier:
            return None
        return self.positions[team]

    def lam(self, position: float) -> float:
        """The lambda a position stands for (logged with the decision)."""
        from regret_gateway.budgets import ladder_lambda

        return ladder_lambda(position, self._lams)

    def step(self) -> None:
        """One step for every budgeted team (the store decides whether it is due), then the positions."""
        from sqlalchemy.orm import Session

        from regret_gateway.store.records import team_key
        from regret_gateway.store.steering import cheapest_model, model_costs, step_team

        engine = self._engine_of()
        now = self.clock()
        positions = {}
        for team in self.teams:
            positions[team] = step_team(engine, self.settings, team, now, self._forecast_of(team)).position  # type: ignore[arg-type]
        models = list(self.settings.models)
        with Session(engine) as session:  # type: ignore[arg-type]
            costs = model_costs(session, models, now)
        self.positions, self.model_costs, self.cheapest = positions, costs, cheapest_model(costs, models)
        if self._on_costs is not None:
            self._on_costs(costs)
        self.steps += 1
        self.stepped.set()
        log.debug("regret-gateway: budget positions %s (cheapest model %s)", {team_key(t): p for t, p in positions.items()},
                  self.cheapest)  # fmt: skip

    def maybe_step(self) -> None:
        """If ``interval_s`` has passed since the last step began, step in a worker thread (never on the
        event loop); requests route at the current positions meanwhile."""
        if not self.auto or not self.active or self._busy.is_set() or time.monotonic() - self._last < self.interval_s:
            return
        self._last = time.monotonic()
        self._busy.set()

        def run() -> None:
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - a store outage must not take routing down
                log.warning("regret-gateway: budget step failed (%s); the last positions hold",
                            str(exc).splitlines()[0] if str(exc) else type(exc).__name__)  # fmt: skip
            finally:
                self._busy.clear()

        threading.Thread(target=run, name="regret-gateway-budgets", daemon=True).start()


FORECAST_ROWS = 500  # logged requests of a team the forecast is computed on (a seeded sample)


def rung_costs(settings: Settings, artifact, X: np.ndarray, seed: int = 0) -> list[float]:
    """The expected cost per request (USD) of each ladder rung (the tiers by lambda with their exploration,
    then the cheapest model) on the requests ``X`` (n, d), under ``artifact``: each request's routing
    distribution times the artifact's cost estimates for it (a position between two rungs costs the mix).
    Empty where the artifact has no cost estimates. What ``retrain`` publishes as a budgeted team's forecast."""
    from regret_gateway.gateway.decisions import ActiveRouter

    if len(X) > FORECAST_ROWS:
        X = X[np.random.default_rng(seed).choice(len(X), FORECAST_ROWS, replace=False)]
    router = ActiveRouter(settings)
    router._artifact = artifact
    costs = router.predicted_costs(artifact, X)
    if len(X) == 0 or not np.isfinite(costs).all():
        return []
    cheapest = settings.models[int(np.argmin(costs.mean(0)))]
    rungs = router.rung_distributions(X, settings.default_tier, cheapest)
    return [float(v) for v in (rungs * costs).sum(2).mean(1)]
