"""Budget days (``demo --replay --budget-days N``): after the rounds, a team on a daily budget sends a day
of traffic whose rate follows the clock (the afternoon 4x the night) with a one-hour surge at 3x (14:00
UTC), through the same hook, store and budget steering as production, on a simulated clock; the
controller steps every STEP_S simulated seconds. The rounds' teams send the platform's traffic beside it
(:class:`Platform`, ``budget_platform`` requests a day: the same clock, not the same curve), from the day
before the budgeted team's first, so that the controller can expect the team's first day to follow it.
Then, on the same requests, in hindsight:

* ``steered``: what the team got (the gateway's choices, exploration included); ``steered, expected``:
  the same positions, each request valued over its routing distribution instead of its one draw (the
  paired comparison with the references below, which are expectations too);
* ``fixed-λ``: the tiers' ladder (:func:`regret_gateway.budgets.ladder.tier_ladder`: every tier, then the cheapest
  model, whatever ladder the team is steered on) at one fixed position (a fixed lambda), the best one that
  spends no more than ``steered``;
* ``hard-cap``: LiteLLM-style: the best single model (highest quality) until the budget is spent, then
  every request refused (429: no answer, no quality);
* ``two-model mix``: the best fixed random mix of two models that spends no more than ``steered``;
* ``own tier``: the team's tier unsteered (what it would have spent without a budget).

Quality is the day's total over every request (a refused one counts 0). The days run on a second gateway
(the rounds' store and router, a config that adds the budgeted team); its daily budget is set before the
first day from that router's tiers: the cheapest model's expected cost per request on the traffic plus
``budget_level`` of the way to the dearest tier's, times the day's expected requests."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from regret_gateway.budgets.ladder import Ladder, Rung, tier_ladder

BUDGET_TEAM = "budgeted"
BUDGET_TIER = "standard"
STEP_S = 300.0  # the demo budget's interval_s, in simulated seconds
SURGE = (14 * 60, 15 * 60, 3.0)  # minutes [from, to) of the day at this multiple of the rate
METHODS = ("steered", "steered, expected", "fixed-λ", "two-model mix", "hard-cap", "own tier")


class SimClock:
    """The gateway's clock: real time until ``t`` is set, then ``t``."""

    def __init__(self) -> None:
        self.t: datetime | None = None

    def __call__(self) -> datetime:
        return self.t or datetime.now(timezone.utc)


def diurnal_rates(per_day: int, peak_minute: int = 960, swing: float = 0.75, surge: bool = True) -> np.ndarray:
    """(1440,) expected requests per minute: a sine over the day peaking at ``peak_minute`` (16:00 UTC;
    1 - ``swing`` to 1 + ``swing`` times the mean), the surge hour at SURGE's multiple, scaled so that a day
    without the surge holds ``per_day``."""
    m = np.arange(1440)
    rate = per_day / 1440 * (1 + swing * np.sin(2 * np.pi * (m - peak_minute + 360) / 1440))
    if surge:
        rate[SURGE[0] : SURGE[1]] *= SURGE[2]
    return rate


def platform_rates(per_day: int) -> np.ndarray:
    """(1440,) the other teams' requests per minute: the same clock, but peaking an hour earlier (15:00 UTC),
    flatter (0.4x to 1.6x) and without the budgeted team's surge: a platform whose day is like the team's,
    not the same."""
    return diurnal_rates(per_day, peak_minute=900, swing=0.6, surge=False)


def rung_costs_on(world, gateway, rows: np.ndarray, ladder: Ladder, cheapest: str | None) -> np.ndarray:
    """(rungs,) the true expected cost per request of each rung of ``ladder`` on the world's prompts ``rows``,
    under ``gateway``'s active router."""
    rungs = gateway.router.rung_distributions(world.X[rows], BUDGET_TIER, ladder, cheapest)
    return (rungs * world.bench.cost[rows]).sum(2).mean(1)


def daily_budget(world, gateway, per_day: int, level: float, rng: np.random.Generator) -> float:
    """The day's budget, set from the router the rounds trained: what the cheapest rung of the tiers' ladder
    (the cheapest model) would cost per request on the traffic, plus ``level`` of the way to its dearest
    tier's, times the day's expected requests (surge included). A budget the ladder can reach, so that
    steering is what is tested (and the same whichever ladder the team is steered on)."""
    from sqlalchemy.orm import Session

    from regret_gateway.budgets.ladder import cheapest_model
    from regret_gateway.store.steering import model_costs

    models = list(gateway.settings.models)
    with Session(gateway.engine) as session:
        cheapest = cheapest_model(model_costs(session, models, datetime.now(timezone.utc)), models)
    rungs = rung_costs_on(world, gateway, rng.choice(world.traffic_ix, size=500), tier_ladder(gateway.settings), cheapest)
    return float((rungs[-1] + level * (rungs[0] - rungs[-1])) * diurnal_rates(per_day).sum())


def budget_gateway(cfg, world, gateway, config: Path, clock: SimClock, rng: np.random.Generator):
    """A second gateway on the rounds' store and router whose config adds BUDGET_TEAM with its daily budget
    (:func:`daily_budget`): the deployment the days run against."""
    import yaml

    from regret_gateway.config import load_settings
    from regret_gateway.gateway.runtime import Gateway

    usd = daily_budget(world, gateway, cfg.budget_requests, cfg.budget_level, rng)
    raw = yaml.safe_load(config.read_text())
    raw["regret_gateway"]["teams"][BUDGET_TEAM] = {
        "tier": BUDGET_TIER,
        "budget": {
            "usd": usd,
            "per": "day",
            "interval_s": STEP_S,
            "ladder": cfg.budget_ladder,
            "drop_dominated": cfg.budget_drop_dominated,
        },
    }
    path = config.with_name("config-budget.yaml")
    path.write_text(yaml.safe_dump(raw))
    seed = int(rng.integers(2**31))
    return Gateway(load_settings(path), encode=world.encode, seed=seed, clock=clock).start()


@dataclass
class BudgetDay:
    day: int
    budget_usd: float
    requests: int
    platform_requests: int = 0  # the other teams' that day (Platform)
    spend: dict[str, float] = field(default_factory=dict)  # USD per method
    quality: dict[str, float] = field(default_factory=dict)  # per request (a refused one counts 0), x100
    answered: dict[str, float] = field(default_factory=dict)  # share of requests answered
    hours: list[float] = field(default_factory=list)  # at each controller step
    spent: list[float] = field(default_factory=list)  # the team's spend so far (steered)
    lam: list[float] = field(default_factory=list)  # the lambda the position stands for
    position: list[float] = field(default_factory=list)
    fixed_position: float = float("nan")  # on the tiers' ladder
    ladder: list[dict] = field(default_factory=list)  # the rungs the team was steered on (with their estimates)
    request_positions: list[float] = field(default_factory=list, repr=False)  # the position each request was routed at


def best_two_model_mix(cost: np.ndarray, quality: np.ndarray, budget: float) -> tuple[int, int, float] | None:
    """(a, b, s): the fixed random mix of models a and b (b's share s) with the most ``quality`` whose ``cost``
    (per model, summed or mean alike) is at most ``budget``: a pair that spends it exactly, or one model alone
    (a = b, s = 0) where that is better or no model costs more; None where every model costs more."""
    best: tuple[float, int, int, float] | None = None
    for a in range(len(cost)):
        if cost[a] <= budget and (best is None or quality[a] > best[0]):
            best = (float(quality[a]), a, a, 0.0)
        for b in range(len(cost)):
            if cost[a] < budget < cost[b]:
                s = float((budget - cost[a]) / (cost[b] - cost[a]))
                q = float((1 - s) * quality[a] + s * quality[b])
                if best is None or q > best[0]:
                    best = (q, a, b, s)
    return None if best is None else best[1:]


def _hindsight(day: BudgetDay, world, gateway, rows: np.ndarray, chosen: np.ndarray) -> None:
    """The references on the day's requests (module doc)."""
    Q, C = world.bench.quality[rows], world.bench.cost[rows]
    n = len(rows)
    idx = np.arange(n)
    s_spend, s_quality = float(C[idx, chosen].sum()), float(Q[idx, chosen].sum())
    # every request was answered: the hook refuses one by raising (a 4xx), which would have stopped the day
    day.spend["steered"], day.quality["steered"], day.answered["steered"] = s_spend, 100 * s_quality / n, 1.0

    def rungs_of(ladder: Ladder) -> np.ndarray:  # (rungs + 1, n, T), a copy of the last: the top mixes it with itself
        rung = gateway.router.rung_distributions(world.X[rows], BUDGET_TIER, ladder, gateway.steerer.cheapest)
        return np.concatenate([rung, rung[-1:]])

    steered = gateway.steerer.ladder(BUDGET_TEAM)
    day.ladder = steered.to_json()
    rung = rungs_of(steered)
    u = np.asarray(day.request_positions)
    j_u = np.minimum(u.astype(int), len(rung) - 2)
    p_u = (1 - (u - j_u))[:, None] * rung[j_u, idx] + (u - j_u)[:, None] * rung[j_u + 1, idx]
    day.spend["steered, expected"], day.quality["steered, expected"] = float((p_u * C).sum()), 100 * float((p_u * Q).sum()) / n
    day.answered["steered, expected"] = 1.0
    rung = rungs_of(tier_ladder(gateway.settings))  # a fixed lambda: every tier, whatever the team is steered on
    n_rungs = len(rung) - 1
    rung_cost, rung_quality = (rung * C).sum((1, 2)), (rung * Q).sum((1, 2))
    best_u, best_q = None, -np.inf
    for u in np.linspace(0.0, n_rungs - 1, 100 * (n_rungs - 1) + 1):
        j = min(int(u), n_rungs - 1)
        s = u - j
        spend, quality = (1 - s) * rung_cost[j] + s * rung_cost[j + 1], (1 - s) * rung_quality[j] + s * rung_quality[j + 1]
        if spend <= s_spend * (1 + 1e-9) and quality > best_q:
            best_u, best_q, best_spend = u, quality, spend
    if best_u is not None:
        day.spend["fixed-λ"], day.quality["fixed-λ"], day.answered["fixed-λ"] = best_spend, 100 * best_q / n, 1.0
        day.fixed_position = float(best_u)
    own = gateway.router.rung_distributions(world.X[rows], BUDGET_TIER, Ladder((Rung("tier", BUDGET_TIER, 0.0),)), None)[0]
    day.spend["own tier"], day.quality["own tier"], day.answered["own tier"] = (
        float((own * C).sum()),
        100 * float((own * Q).sum()) / n,
        1.0,
    )
    total_c, total_q = C.sum(0), Q.sum(0)  # per model over the day
    if (mix := best_two_model_mix(total_c, total_q, s_spend)) is not None:
        a, b, s = mix
        mix_spend, mix_q = (1 - s) * total_c[a] + s * total_c[b], (1 - s) * total_q[a] + s * total_q[b]
        day.spend["two-model mix"], day.quality["two-model mix"], day.answered["two-model mix"] = mix_spend, 100 * mix_q / n, 1.0
    best = world.best_single[min(world.best_single)]
    answered = np.cumsum(C[:, best]) <= day.budget_usd  # served until the next answer would pass the budget
    day.spend["hard-cap"] = float(C[answered, best].sum())
    day.quality["hard-cap"], day.answered["hard-cap"] = 100 * float(Q[answered, best].sum()) / n, float(answered.mean())


class Platform:
    """The other teams' traffic on the budget days' clock (:func:`platform_rates`, ``per_day`` requests a day):
    each minute's requests, each from one of the rounds' teams at random, on prompts of the traffic; drawn
    from its own generator, so that the budgeted team's days are the same with it or without."""

    def __init__(self, cfg, world, seed: int) -> None:
        self.rng = np.random.default_rng([seed, 23])
        self.teams = [team for team, _, _ in cfg.tiers]
        self.per_day, self.world = cfg.budget_platform, world

    def new_day(self) -> int:
        """Draw the next day's requests (each minute's count, their prompts and teams); returns how many."""
        self.counts = self.rng.poisson(platform_rates(self.per_day)) if self.per_day else np.zeros(1440, dtype=int)
        n = int(self.counts.sum())
        self.rows, self.team_ix = self.rng.choice(self.world.traffic_ix, size=n), self.rng.integers(len(self.teams), size=n)
        self.ends = np.cumsum(self.counts)
        return n

    async def send_minute(self, replay, clock: SimClock, start: datetime, minute: int) -> None:
        """The day's requests of ``minute`` (after ``start``), spread over it on the simulated clock."""
        first, count = self.ends[minute] - self.counts[minute], int(self.counts[minute])
        for j in range(count):
            clock.t = start + timedelta(minutes=minute, seconds=60 * (j + 0.5) / count)
            await replay._ask(self.teams[int(self.team_ix[first + j])], int(self.rows[first + j]))


async def _send_platform_day(platform: Platform, replay, clock: SimClock, start: datetime) -> None:
    """A day of the platform's traffic alone (the day before the budgeted team's first)."""
    platform.new_day()
    for minute in range(1440):
        await platform.send_minute(replay, clock, start, minute)


async def _send_day(gateway, replay, world, clock: SimClock, day: BudgetDay, start: datetime, counts: np.ndarray,
                    rows: np.ndarray, platform: Platform) -> list[int]:  # fmt: skip
    """Send the day's requests minute by minute on the simulated clock, the platform's between them, a
    controller step every STEP_S; returns the model each of the budgeted team's requests was routed to
    (index into the world's models)."""
    chosen: list[int] = []
    day.platform_requests = platform.new_day()
    for minute, count in enumerate(counts):
        if minute % int(STEP_S // 60) == 0:
            clock.t = start + timedelta(minutes=minute)
            gateway.writer.drain(timeout=120)  # the spend so far is in the store
            gateway.steerer.step()
            pos = gateway.steerer.positions[BUDGET_TEAM]
            day.hours.append(minute / 60)
            day.position.append(pos)
            day.lam.append(gateway.steerer.lam(BUDGET_TEAM, pos))
            k = len(chosen)
            day.spent.append(float(world.bench.cost[rows[:k], chosen].sum()) if k else 0.0)
        await platform.send_minute(replay, clock, start, minute)
        for j in range(count):
            day.request_positions.append(gateway.steerer.positions[BUDGET_TEAM])
            clock.t = start + timedelta(minutes=minute, seconds=60 * j / count)
            chosen.append((await replay._ask(BUDGET_TEAM, int(rows[len(chosen)])))[0])
    return chosen


def run_budget_days(cfg, world, rounds_gateway, config: Path, clock: SimClock, rng: np.random.Generator,
                    echo=print) -> list[BudgetDay]:  # fmt: skip
    """The budget days (module doc), after the rounds that ``rounds_gateway`` served under ``config``."""
    from regret_gateway.bench.demo.traffic import ReplayTeams

    gateway = budget_gateway(cfg, world, rounds_gateway, config, clock, rng)
    replay = ReplayTeams(gateway, world)
    gateway.steerer.auto = False  # the days step the controller on their own clock
    budget = gateway.settings.teams[BUDGET_TEAM].budget.usd
    platform = Platform(cfg, world, cfg.seed)
    # the day after tomorrow: tomorrow is the platform's day before (with no platform, an empty one)
    first = (datetime.now(timezone.utc) + timedelta(days=2)).replace(hour=0, minute=0, second=0, microsecond=0)
    asyncio.run(_send_platform_day(platform, replay, clock, first - timedelta(days=1)))
    days = []
    for d in range(cfg.budget_days):
        start = first + timedelta(days=d)
        counts = rng.poisson(diurnal_rates(cfg.budget_requests))
        rows = rng.choice(world.traffic_ix, size=int(counts.sum()), replace=True)
        day = BudgetDay(d, budget, len(rows))

        chosen = np.asarray(asyncio.run(_send_day(gateway, replay, world, clock, day, start, counts, rows, platform)), dtype=int)
        gateway.writer.drain(timeout=120)
        _hindsight(day, world, gateway, rows, chosen)
        days.append(day)
        echo(budget_table([day]))
        echo("steered along: " + ", ".join(Rung(**r).label for r in day.ladder))
    gateway.close()
    return days


def budget_table(days: list[BudgetDay]) -> str:
    lines = ["| day | method | spend $ | spend / budget | quality x100 | answered | quality per $ |",
             "|---:|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for day in days:
        for m in METHODS:
            if m in day.spend:
                spend, q = day.spend[m], day.quality[m]
                per_dollar = q * day.requests / 100 / spend if spend > 0 else float("nan")
                lines.append(f"| {day.day} | {m} | {spend:.4f} | {spend / day.budget_usd:.3f} | {q:.2f} | "
                             f"{100 * day.answered[m]:.0f}% | {per_dollar:.1f} |")  # fmt: skip
    return "\n".join(lines)


def budget_verdict(days: list[BudgetDay]) -> str:
    out = []
    for day in days:
        ratio = day.spend["steered"] / day.budget_usd
        q = day.quality
        out.append(
            f"day {day.day}: spend {100 * ratio:.1f}% of the budget ({'within' if abs(ratio - 1) <= 0.05 else 'OUTSIDE'} "
            f"±5%); quality {q['steered']:.2f} (expected {q['steered, expected']:.2f}) vs fixed-λ {q.get('fixed-λ', float('nan')):.2f}, two-model mix "
            f"{q.get('two-model mix', float('nan')):.2f}, hard-cap {q['hard-cap']:.2f} ({100 * day.answered['hard-cap']:.0f}% answered)"
        )
    return "\n".join(out)


def write_budget_report(days: list[BudgetDay], out: Path) -> None:
    """budget.json, budget.md and budget.png (cumulative spend against the budget, and lambda, over the days)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    doc = [{k: v for k, v in d.__dict__.items() if k != "request_positions"} for d in days]
    (out / "budget.json").write_text(json.dumps(doc, indent=2, default=float))
    (out / "budget.md").write_text(budget_table(days) + "\n\n" + budget_verdict(days) + "\n")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for day in days:
        hours = 24 * day.day + np.asarray(day.hours)
        top.plot(hours, day.spent, color="tab:blue", label="steered spend" if day.day == 0 else None)
        top.plot([24 * day.day, 24 * day.day + 24], [0, day.budget_usd], color="grey", ls="--",
                 label="budget, spent evenly" if day.day == 0 else None)  # fmt: skip
        top.hlines(day.budget_usd, 24 * day.day, 24 * day.day + 24, color="black", label="budget" if day.day == 0 else None)
        bottom.step(hours, day.lam, where="post", color="tab:orange", label="λ now" if day.day == 0 else None)
    top.set_ylabel("spend in the day ($)")
    bottom.set_ylabel("λ now")
    bottom.set_title("λ the team is routed at (past the highest tier's: a share to the cheapest model)", fontsize=9)
    bottom.set_xlabel("hours (UTC; a surge at 3x from 14:00 to 15:00 each day)")
    top.legend(loc="upper left", fontsize=8)
    bottom.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "budget.png", dpi=120)
    plt.close(fig)
