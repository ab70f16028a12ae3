"""What routing saved, in dollars, from the store's own logs (``regret-gateway report``, ``status``,
``GET /regret/report``): per team and tier over a window, its requests, its spend and the mean quality of
what it was served, and against every fixed alternative -- each model alone, the tier's fallback, the
dearest model -- what the same requests would have cost and scored (the estimator and its intervals:
:mod:`regret_gateway.savings.alternatives`). Quality is read off the scored requests (users' scores and the
judge's, as retrain reads them: :func:`~regret_gateway.trainset.window.training_set`); dollars are scaled
from the scored requests' per-request estimate to all of the window's requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.causal.stats import prompt_groups
from regret_gateway.config import Settings
from regret_gateway.prices import usd
from regret_gateway.savings.alternatives import Alternative, Served, value_alternatives
from regret_gateway.store.queries import daily_usage, left_out_of_usage
from regret_gateway.trainset.window import training_set

N_BOOT = 300
MAX_ROWS = 20_000  # scored requests read at most (a stratified sample beyond): the bootstrap holds N_BOOT x rows counts


@dataclass(frozen=True)
class TeamSavings:
    """One team on one tier over the window (``team`` None: requests without a team)."""

    team: str | None
    tier: str
    requests: int
    spend_usd: float
    served: Served | None  # None: no scored request (no quality, no estimate)
    alternatives: list[Alternative]
    fallback: str | None
    days: list[str] = field(default_factory=list)  # each day of the window with requests (ISO dates)
    daily_spend: list[float] = field(default_factory=list)
    daily_mix: list[dict[str, int]] = field(default_factory=list)  # per day, requests by the model that answered

    @property
    def name(self) -> str:
        return self.team if self.team is not None else "(no team)"

    @property
    def dearest(self) -> Alternative | None:
        """The supported alternative that would have cost the most."""
        est = [a for a in self.alternatives if a.supported]
        return max(est, key=lambda a: a.cost) if est else None

    def against(self, alt: Alternative) -> str:
        """``saved $X (Y%) [$lo, $hi] against always m, quality -0.8 points [-2.1, +0.5]`` (or why not)."""
        if not alt.supported:
            return f"against always {alt.model}: no estimate ({alt.why})"
        n = self.requests
        total, lo, hi = alt.saved * n, alt.saved_ci[0] * n, alt.saved_ci[1] * n
        share = abs(alt.saved) / alt.cost if alt.cost > 0 else float("nan")
        money = f"saved {usd(total)} ({share:.0%}) [{usd(lo)}, {usd(hi)}]"
        if total < 0:  # routing spent more than the alternative would have
            money = f"spent {usd(-total)} more (+{share:.0%}) [{usd(-hi)}, {usd(-lo)}]"
        return (
            f"{money} against always {alt.model}, quality "
            f"{100 * alt.quality_gap:+.1f} points [{100 * alt.quality_gap_ci[0]:+.1f}, {100 * alt.quality_gap_ci[1]:+.1f}]"
        )

    def headline(self) -> str:
        """One line: the requests, the spend, and the saving against the dearest model."""
        head = f"team {self.name} (tier {self.tier}): {self.requests:,} requests, {usd(self.spend_usd)} spent"
        if self.served is None:
            return head + "; no scored request: nothing to compare"
        dear = self.dearest
        tail = "no model was logged often enough to compare" if dear is None else self.against(dear) + " (the dearest)"
        return f"{head}; {tail}"

    def lines(self) -> list[str]:
        out = [self.headline()]
        if self.served is not None:
            out.append(f"  served: mean quality {100 * self.served.quality:.1f} points on {self.served.rows:,} scored requests, "
                       f"${self.served.cost * 1000:,.3f} per 1,000")  # fmt: skip
            for alt in sorted(self.alternatives, key=lambda a: (not a.supported, -a.cost if a.supported else 0)):
                mark = " (the tier's fallback)" if alt.model == self.fallback else ""
                out.append(f"  {self.against(alt)}{mark}")
        return out


@dataclass(frozen=True)
class SavingsReport:
    since: datetime
    until: datetime
    teams: list[TeamSavings]
    left_out: dict[str, int] = field(default_factory=dict)  # requests of the window not reported, by why

    def text(self) -> str:
        head = f"savings from {self.since:%Y-%m-%d %H:%M} to {self.until:%Y-%m-%d %H:%M} UTC (95% intervals)"
        if not self.teams:
            head += ": no answered request to report"
        return "\n".join([head, *(line for t in self.teams for line in t.lines()), *self.left_out_lines()])

    def left_out_lines(self) -> list[str]:
        """What the report leaves out, and why (nothing where it leaves nothing out)."""
        why = {"mock": "answered by a mock upstream (serve --mock-upstream: no real spend)",
               "no_outcome": "with no answer logged yet"}  # fmt: skip
        parts = [f"{n:,} request{'s' if n != 1 else ''} {why[k]}" for k, n in self.left_out.items() if n]
        return [f"left out: {'; '.join(parts)}"] if parts else []


def savings_report(
    settings: Settings, session: Session, since: datetime, until: datetime, *, team: str | None = None, n_boot: int = N_BOOT,
    seed: int = 0,
) -> SavingsReport:  # fmt: skip
    """Every team and tier with requests in [since, until) (only ``team``'s where given; module doc). Past
    MAX_ROWS scored requests, quality and the per-request estimates read a stratified sample of them (every
    tier and model keeps its share, the propensities stay exact); requests and spend count every one."""
    usage: dict[tuple[str | None, str], dict] = {}
    for who, tier, on, model, n, cost in daily_usage(session, since, until, team):
        u = usage.setdefault((who, tier), {"requests": 0, "spend": 0.0, "days": {}})
        day = u["days"].setdefault(on, {"spend": 0.0, "mix": {}})
        u["requests"] += n
        u["spend"] += cost
        day["spend"] += cost
        day["mix"][model] = day["mix"].get(model, 0) + n
    ts = training_set(session, model_names=settings.models or None, since=since, until=until, team=team, trust=settings.trust,
                      max_rows=MAX_ROWS)  # fmt: skip
    logged = ts.logged
    teams, tiers = np.array(ts.teams, dtype=object), np.array(ts.tiers, dtype=object)
    codes = ts.logger_codes()
    out = []
    for (who, tier), u in sorted(usage.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        spec = settings.tiers.get(tier)
        served: Served | None = None
        alternatives: list[Alternative] = []
        if logged is not None and logged.propensity is not None:
            rows = np.flatnonzero((teams == who) & (tiers == tier))
            if len(rows):
                part = logged.subset(rows)
                served, alternatives = value_alternatives(
                    part.model_names, part.action, part.quality if part.target is None else part.target, part.cost,
                    logged.propensity[rows], strata=codes[rows], groups=prompt_groups(part.X), favoured=ts.favoured[rows],
                    distributions=ts.distributions[rows],
                    n_boot=n_boot, seed=seed,
                )  # fmt: skip
        days = sorted(u["days"])
        fallback = settings.fallback_of(tier) if spec and settings.models else None
        out.append(TeamSavings(who, tier, u["requests"], u["spend"], served, alternatives, fallback, days,
                               [u["days"][d]["spend"] for d in days], [u["days"][d]["mix"] for d in days]))  # fmt: skip
    return SavingsReport(since, until, out, left_out_of_usage(session, since, until, team))
