"""Budget steering in the store: a team's controller step reads its spend and moves its ladder position,
one step per interval whichever replica asks; a spent budget goes to the cheapest model; a new period
starts where the last left off. Each test runs on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from regret_gateway.budgets.controller import step_team
from regret_gateway.budgets.ladder import Ladder, Rung, cheapest_model, tier_ladder
from regret_gateway.budgets.status import budget_status
from regret_gateway.config import Settings
from regret_gateway.store.engine import make_engine
from regret_gateway.store.records import DecisionRecord, OutcomeRecord
from regret_gateway.store.schema import BudgetSteering
from regret_gateway.store.steering import model_costs
from regret_gateway.store.writes import record_decisions

DAY = datetime(2026, 11, 27, tzinfo=timezone.utc)


def settings(usd: float = 1.0) -> Settings:
    return Settings(
        models=("tiny", "small", "large"), default_tier="standard",
        tiers={"premium": {"lam": 0.0}, "standard": {"lam": 100.0}, "economy": {"lam": 1000.0}},
        teams={"a": {"tier": "standard", "budget": {"usd": usd, "per": "day", "interval_s": 60}}, "b": {"tier": "economy"}},
    )  # fmt: skip


def spend(engine, n: int, cost: float, *, start: datetime, model: str = "large", team: str = "a", tag: str = "") -> None:
    """``n`` requests of ``team`` over the minute after ``start``, each costing ``cost``."""
    rows = [
        DecisionRecord(
            request_id=f"{team}{tag}{start:%H%M%S}-{i}",
            tier="standard",
            lam=100.0,
            embedding_model="m",
            embedding=np.zeros(2, dtype=np.float32),
            chosen_model=model,
            propensity=1.0,
            team=team,
            prompt_hash="h",
            created_at=start + timedelta(seconds=60 * i / n),
            outcome=OutcomeRecord(request_id=f"{team}{tag}{start:%H%M%S}-{i}", cost_usd=cost),
        )  # fmt: skip
        for i in range(n)
    ]
    with Session(engine) as s, s.begin():
        record_decisions(s, rows)


def test_an_overspending_team_is_stepped_toward_the_cheap_end_once_per_interval(engine):
    s = settings(usd=1.0)
    first = step_team(engine, s, "a", DAY + timedelta(hours=1))
    assert (first.position, first.state) == (1.0, "waiting")  # its own tier (standard: rung 1) until it has traffic
    # 40 requests at 1 cent in the first hour: on that pace the day costs ~$9.6 against $1
    spend(engine, 40, 0.01, start=DAY + timedelta(hours=1, minutes=1))
    stepped = step_team(engine, s, "a", DAY + timedelta(hours=1, minutes=2))
    assert stepped.state == "stepped" and stepped.position > first.position
    assert stepped.lam == pytest.approx(100.0 + (stepped.position - 1.0) * 900.0)  # between standard and economy
    again = step_team(engine, s, "a", DAY + timedelta(hours=1, minutes=2, seconds=30))  # within the interval
    assert again == stepped
    with Session(engine) as session:
        status = budget_status(session, s, "a", DAY + timedelta(hours=1, minutes=3))
    assert status.lam == stepped.lam and status.state == "stepped" and "standard" in status.route and "economy" in status.route
    assert status.to_dict()["route"] == status.route and "λ now" in status.line()


@pytest.fixture
def replicas(db_url):
    """Two engines on one migrated database: two gateway replicas sharing a store."""
    from regret_gateway.store.migrate import upgrade

    upgrade(db_url)
    one, two = make_engine(db_url), make_engine(db_url)
    step_team(one, settings(usd=1.0), "a", DAY)  # the team's row, at its tier
    yield one, two
    one.dispose()
    two.dispose()


def test_two_replicas_sharing_a_store_route_one_team_at_one_position(replicas):
    """Two gateways (two engines) ask for the team's step 30 s apart: one step is taken, and both
    route at its position; the next interval's step is again one, whoever asks first."""
    one, two = replicas
    s = settings(usd=1.0)
    spend(one, 40, 0.01, start=DAY + timedelta(minutes=1))
    a = step_team(one, s, "a", DAY + timedelta(minutes=2))
    spend(two, 60, 0.01, start=DAY + timedelta(minutes=2), tag="y")  # 30 more by the time the second asks
    b = step_team(two, s, "a", DAY + timedelta(minutes=2, seconds=30))
    assert a == b and a.state == "stepped"
    spend(two, 40, 0.01, start=DAY + timedelta(minutes=3), tag="x")
    c = step_team(two, s, "a", DAY + timedelta(minutes=4))
    d = step_team(one, s, "a", DAY + timedelta(minutes=4, seconds=1))
    assert c == d and c.position > a.position and c.updated_at == DAY + timedelta(minutes=4)
    with Session(one) as session:
        assert session.scalar(select(func.count()).select_from(BudgetSteering)) == 1


def test_a_spent_budget_routes_to_the_cheapest_model_and_the_next_period_starts_at_the_mean_position(engine):
    s = settings(usd=0.1)
    spend(engine, 30, 0.005, start=DAY + timedelta(hours=2))  # $0.15 of $0.10
    spend(engine, 30, 0.0001, start=DAY + timedelta(hours=2, minutes=5), model="tiny", team="b")
    spent = step_team(engine, s, "a", DAY + timedelta(hours=3))
    assert (spent.position, spent.state) == (3.0, "spent")  # the last rung: the cheapest model
    with Session(engine) as session:
        costs = model_costs(session, list(s.models), DAY + timedelta(hours=3))
        assert costs == pytest.approx({"large": 0.005, "tiny": 0.0001}) and cheapest_model(costs, list(s.models)) == "tiny"
        status = budget_status(session, s, "a", DAY + timedelta(hours=3))
    assert status.route == "the cheapest model" and "OVER BUDGET" in status.line() and "cannot be met" in status.line()
    assert spent.period_mean == 1.0  # its 30 requests were routed at its tier (rung 1)
    spend(engine, 10, 0.001, start=DAY + timedelta(hours=4))  # 10 more at the cheapest end (rung 3)
    later = step_team(engine, s, "a", DAY + timedelta(hours=5))
    assert later.state == "spent" and later.period_mean == pytest.approx((30 * 1.0 + 10 * 3.0) / 40)
    tomorrow = step_team(engine, s, "a", DAY + timedelta(days=1, minutes=1))
    assert tomorrow.period_start == DAY + timedelta(days=1) and tomorrow.position == pytest.approx(1.5)


def test_two_replicas_stepping_at_once_take_one_step(replicas, monkeypatch):
    """Replica one reads the team's row, and before it writes, replica two steps: one's write finds the row
    changed, takes no second step and returns two's position."""
    from regret_gateway.budgets import controller
    from regret_gateway.store import steering

    one, two = replicas
    s = settings(usd=1.0)
    spend(one, 40, 0.01, start=DAY + timedelta(minutes=1))
    real, inside, calls = controller.expected_requests, [], []

    def meanwhile(session, *args):  # runs inside one's step, after it read the row
        calls.append(1)
        if len(calls) == 1:  # two's own step calls this too: it reads the store as usual
            inside.append(step_team(two, s, "a", DAY + timedelta(minutes=2, seconds=1)))
        return real(session, *args)

    monkeypatch.setattr(controller, "expected_requests", meanwhile)
    mine = step_team(one, s, "a", DAY + timedelta(minutes=2))
    assert inside and inside[0].state == "stepped" and mine == inside[0]
    with Session(two) as session:
        assert steering.read_steering(session, "a") == inside[0]


def test_a_teams_first_period_starts_where_the_published_forecast_spends_its_budget(engine):
    """A team that had traffic before it had a budget: its first step starts at the position whose forecast
    cost per request spends the budget over as many requests as the previous period held."""
    s = settings(usd=0.5)
    spend(engine, 100, 0.01, start=DAY - timedelta(days=1, hours=-1))  # yesterday: 100 requests
    spend(engine, 5, 0.01, start=DAY - timedelta(days=2))  # the store holds all of yesterday
    forecast = [0.01, 0.004, 0.001, 0.0002]  # per request on premium, standard, economy, the cheapest model
    first = step_team(engine, s, "a", DAY + timedelta(minutes=1), tier_ladder(s, forecast))
    # $0.005 a request affordable: between premium ($0.01) and standard ($0.004), 5/6 of the way
    assert first.position == pytest.approx(5 / 6) and first.state == "waiting"


def test_a_new_teams_first_day_expects_the_rest_of_the_platforms_day_before(engine):
    """Team a's first day: 40 requests at 1 cent in its first hour against $1. At that rate the day holds
    ~900 more and it must go cheaper; but yesterday the platform (team b) sent 99% of its traffic in the
    first hour, so a's day is expected to be nearly over: it may spend more per request, and steps toward
    quality."""
    s = settings(usd=1.0)
    spend(engine, 5, 0.001, start=DAY - timedelta(days=2), team="b")  # the store holds all of yesterday
    spend(engine, 990, 0.001, start=DAY - timedelta(days=1, minutes=-5), team="b")
    spend(engine, 10, 0.001, start=DAY - timedelta(hours=12), team="b")
    spend(engine, 40, 0.01, start=DAY + timedelta(minutes=30))
    first = step_team(engine, s, "a", DAY + timedelta(minutes=20))
    stepped = step_team(engine, s, "a", DAY + timedelta(hours=1))
    assert stepped.state == "stepped" and stepped.position < first.position


def test_start_position_interpolates_between_the_rungs_around_the_affordable_cost():
    ladder = tier_ladder(settings(usd=1.0), [0.01, 0.004, 0.001, 0.0002])
    assert ladder.start(2.0, 100) == 0.0  # $0.02 a request: the dearest tier
    assert ladder.start(0.1, 100) == pytest.approx(2.0)  # exactly economy's $0.001
    assert ladder.start(0.001, 100) == 3.0  # under the cheapest model's cost: the cheapest end
    assert ladder.start(1.0, 0) is None and tier_ladder(settings(usd=1.0)).start(1.0, 100) is None  # no forecast


def test_a_published_frontier_ladder_is_stepped_on_and_a_shorter_one_caps_the_position(engine):
    """The team steps on the ladder it is given: its top bounds the position (spent: the last rung), its
    rungs' lambdas are what the position stands for, and the status describes its rungs."""
    s = settings(usd=0.01)
    frontier = Ladder((Rung("model", "large", 0.0, 0.01, 0.9), Rung("model", "small", 50.0, 0.001, 0.5)))
    spend(engine, 30, 0.01, start=DAY)  # the whole budget already
    spent = step_team(engine, s, "a", DAY + timedelta(hours=1), frontier)
    assert spent.state == "spent" and spent.position == 1.0 and spent.lam == 50.0  # the top of a 2-rung ladder
    with Session(engine) as session:
        status = budget_status(session, s, "a", DAY + timedelta(hours=1), frontier)
    assert status.route == "model small" and status.unmeetable.startswith("spent")


def test_after_a_retrain_publishes_another_ladder_the_team_keeps_its_lambda_not_its_rungs_number(engine):
    """A team stepped to standard (position 1 of the tiers' ladder) keeps standard's lambda when the next
    router leaves premium out (standard is then rung 0): its next step starts from standard, not from the
    rung that now has number 1 (economy). On an unchanged ladder a position between two rungs of the same
    lambda (economy and the cheapest model) stays where it is."""
    s = settings(usd=10.0)
    full = tier_ladder(s)  # premium 0, standard 100, economy 1000, the cheapest model 1000
    shorter = Ladder(full.rungs[1:])
    assert step_team(engine, s, "a", DAY + timedelta(hours=1), full).position == 1.0  # its own tier, standard
    spend(engine, 40, 0.05, start=DAY + timedelta(hours=1, minutes=1))  # over pace: half a rung toward cheap
    moved = step_team(engine, s, "a", DAY + timedelta(hours=1, minutes=2), shorter)
    assert moved.state == "stepped" and moved.position == 0.5 and moved.lam == pytest.approx(550.0)  # from standard
    # back on the full ladder from lambda 550 (1.5), then past economy toward the cheapest model (both at
    # lambda 1000): there, on one ladder, the position holds
    for k in (3, 5):
        spend(engine, 40, 0.05, start=DAY + timedelta(hours=1, minutes=k))
        last = step_team(engine, s, "a", DAY + timedelta(hours=1, minutes=k + 1), full)
    assert last.position == 2.5 and last.lam == 1000.0
    waiting = step_team(engine, s, "a", DAY + timedelta(hours=1, minutes=10), full)  # no requests since
    assert waiting.state == "stepped" and waiting.position == 2.5
