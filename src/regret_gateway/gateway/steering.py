"""The gateway's side of budget steering: each budgeted team's ladder position, refreshed from the store.

:class:`Steerer` keeps, per team with a budget, the position its requests are routed at
(:mod:`regret_gateway.budgets`) and the ladder it was stepped on (:mod:`regret_gateway.budgets.ladder`: the tiers',
or, for a team whose budget says ``ladder: frontier``, the active router's published frontier for it), each model's mean cost per answer and the
cheapest model (the tier ladder's last rung; the per-request caps' costs where the router has no cost
estimates). ``maybe_step()``,
called on the request path, runs a step in a worker thread at most every ``interval_s`` (the smallest
of the teams'): the store takes each team's controller step once per interval for every replica
(:func:`regret_gateway.budgets.controller.step_team`) and every replica routes at the position it returns.
A team not stepped yet routes at its own tier; a store that fails keeps the last positions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from regret_gateway.budgets.ladder import Ladder, tier_ladder
from regret_gateway.config import Settings

if TYPE_CHECKING:
    from regret_gateway.prices import CostLine

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Steerer:
    """Per budgeted team, the ladder position its requests are routed at (None: its tier, unsteered)."""

    def __init__(self, settings: Settings, engine_of: Callable[[], object], clock: Callable[[], datetime] = _utcnow,
                 on_costs: Callable[[dict[str, float], dict[str, CostLine]], None] | None = None,
                 ladder_of: Callable[[str, str], Ladder | None] | None = None):  # fmt: skip
        self.settings = settings
        self._engine_of = engine_of  # the gateway's engine, read when a step runs (built at start)
        self._on_costs = on_costs  # told each step's model costs and cost lines (the router's caps read them)
        self._ladder_of = ladder_of or (lambda team, kind: None)  # the active router's published ladder of a kind for a team
        self.clock = clock
        self._tier_ladder = tier_ladder(settings)
        self.teams = sorted(team for team, spec in settings.teams.items() if spec.budget is not None)
        self.interval_s = min((settings.teams[t].budget.interval_s for t in self.teams), default=0.0)  # type: ignore[union-attr]
        self.positions: dict[str, float] = {}
        self.ladders: dict[str, Ladder] = {}  # the ladder each team's position was stepped on
        self.cheapest: str | None = None
        self.model_costs: dict[str, float] = {}  # mean cost per answer (the store's last week): caps without estimates
        self.active = bool(self.teams) or settings.cost_capped  # anything to step: budgets, or costs for the caps
        if not self.teams and settings.cost_capped:
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

    def ladder(self, team: str | None) -> Ladder:
        """The ladder ``team``'s position was stepped on (the tiers' before its first step)."""
        return self.ladders.get(team, self._tier_ladder) if team is not None else self._tier_ladder

    def lam(self, team: str | None, position: float) -> float:
        """The lambda a position stands for on the team's ladder (logged with the decision)."""
        return self.ladder(team).lam(position)

    def step(self) -> None:
        """One step for every budgeted team (the store decides whether it is due), then the positions."""
        from sqlalchemy.orm import Session

        from regret_gateway.budgets.controller import step_team
        from regret_gateway.budgets.ladder import cheapest_model
        from regret_gateway.store.records import team_key
        from regret_gateway.store.steering import cost_lines, model_costs

        engine = self._engine_of()
        now = self.clock()
        positions, ladders = {}, {}
        for team in self.teams:
            kind = self.settings.teams[team].budget.ladder  # type: ignore[union-attr]
            ladders[team] = self._ladder_of(team, kind) or self._tier_ladder  # the tiers' with forecast costs, where published
            positions[team] = step_team(engine, self.settings, team, now, ladders[team]).position  # type: ignore[arg-type]
        models = list(self.settings.models)
        with Session(engine) as session:  # type: ignore[arg-type]
            costs = model_costs(session, models, now)
            lines = cost_lines(session, models, now)
        self.positions, self.ladders, self.model_costs, self.cheapest = positions, ladders, costs, cheapest_model(costs, models)
        if self._on_costs is not None:
            self._on_costs(costs, lines)
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


def published_ladder(artifact, team: str, kind: str, drop_dominated: bool = False) -> Ladder | None:
    """The ``kind`` ladder (``frontier`` or ``tiers``, the latter with forecast costs) ``artifact`` publishes
    for ``team`` (:attr:`~regret_gateway.servable.PublishedRouter.ladders`: the team's own, else everyone's);
    None where it publishes none. ``drop_dominated``: the tiers' ladder without the rungs it flags as
    dominated (:meth:`~regret_gateway.budgets.ladder.Ladder.undominated`)."""
    ladder = None if artifact is None else artifact.router.ladders.of(team, kind)
    return ladder.undominated() if ladder is not None and kind == "tiers" and drop_dominated else ladder
