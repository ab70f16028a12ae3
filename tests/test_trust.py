"""Whose user scores train the router (regret_gateway/trust.py): a team that scores against a reference is
left out, honest teams are not, a count of teams never decides, the cap and the trusted list hold."""

from __future__ import annotations

import numpy as np
import pytest

from regret_gateway.config import TrustSpec
from regret_gateway.trust import check_teams

MODELS = ("a", "b", "c")
QUALITY = {"a": 0.4, "b": 0.8, "c": 0.3}  # the true chance that each model's answer is good


def scores(rng, team: str, n: int, *, attack: bool = False, judge: bool = False):
    """``n`` requests of ``team`` routed uniformly, scored honestly (or by the probe's attack: 1 for a, 0 for
    the rest); ``judge``: scored by the judge instead of the team's users."""
    models = rng.choice(MODELS, n)
    values = np.array([(1.0 if m == "a" else 0.0) if attack else float(rng.random() < QUALITY[m]) for m in models])
    ids = [f"{team}-{'j' if judge else 'u'}{i}" for i in range(n)]
    return ids, [team] * n, list(models), values, np.full(n, not judge)


def check(parts, spec=TrustSpec()):
    ids, teams, models, values, users = (sum((list(p[k]) for p in parts), []) for k in range(5))
    return check_teams(ids, teams, models, np.array(values), np.array(users), spec)


def test_a_team_scoring_against_the_judge_is_left_out_and_honest_teams_are_not():
    rng = np.random.default_rng(0)
    parts = [scores(rng, "h1", 400), scores(rng, "h2", 400), scores(rng, "x", 600, attack=True)]
    out, verdicts = check([*parts, scores(rng, "j", 200, judge=True)])
    assert verdicts["x"].kept == 0 and verdicts["x"].verdict.startswith("flagged") and abs(verdicts["x"].gap) > 0.2
    assert verdicts["h1"].kept == 400 and verdicts["h2"].kept == 400
    assert out == {f"x-u{i}" for i in range(600)}
    out, verdicts = check(parts)  # no reference: two teams against one is a dispute, not a vote
    assert out == {i for p in parts for i in p[0]} and all(v.verdict.startswith("disputed") for v in verdicts.values())


def test_a_coalition_cannot_outvote_an_honest_team_it_can_only_stop_the_app_it_shares_from_training():
    """The probe's coalition: two teams score 1 for model a and 0 for the rest on the app they share with an
    honest team. By count they win; here none of their scores ever trains, the honest team is never flagged,
    and its other app keeps training. The judge or an operator-listed reference team restores the shared app."""
    rng = np.random.default_rng(6)
    honest = [app_scores(rng, "h", "code", 400), app_scores(rng, "h", "chat", 300)]
    colluders = [app_scores(rng, x, "code", 400, attack=True) for x in ("x1", "x2")]
    out, verdicts = check_apps([*honest, *colluders])
    assert out == {i for p in [honest[0], *colluders] for i in p[0]}  # the shared app's user scores, every side's
    assert verdicts["h"].kept == 300 and "not in app code" in verdicts["h"].verdict
    assert verdicts["x1"].kept == verdicts["x2"].kept == 0
    for spec, judge in ((TrustSpec(reference=("h",)), []), (TrustSpec(), [app_scores(rng, "j", "code", 150, judge=True)])):
        out, verdicts = check_apps([*honest, *colluders, *judge], spec)
        assert out == {i for p in colluders for i in p[0]}, spec  # the reference decides: the colluders leave
        assert verdicts["h"].kept == 700 and verdicts["h"].verdict in ("reference", "trusted")
        assert verdicts["x1"].verdict.startswith("flagged") and verdicts["x2"].verdict.startswith("flagged")


def test_the_judge_tells_which_of_two_teams_is_right_and_without_it_neither_trains():
    rng = np.random.default_rng(1)
    honest, attacker = scores(rng, "h", 400), scores(rng, "x", 600, attack=True)
    _, with_judge = check([honest, attacker, scores(rng, "h", 150, judge=True)])
    assert with_judge["x"].kept == 0 and with_judge["h"].verdict == "trusted"
    out, alone = check([honest, attacker])
    assert alone["x"].kept == 0 and alone["h"].kept == 0 and alone["h"].verdict.startswith("disputed")
    assert len(out) == 1000


@pytest.mark.parametrize("seed", range(5))
def test_honest_teams_are_never_flagged(seed):
    rng = np.random.default_rng(100 + seed)
    out, verdicts = check(
        [scores(rng, f"h{k}", int(rng.integers(100, 600))) for k in range(4)] + [scores(rng, "j", 200, judge=True)]
    )
    assert out == set() and all(v.verdict == "trusted" for v in verdicts.values())


def test_only_listed_teams_train_and_an_exempt_team_is_not_checked():
    rng = np.random.default_rng(2)
    parts = [scores(rng, "h1", 300), scores(rng, "h2", 300), scores(rng, "x", 300, attack=True)]
    out, verdicts = check(parts, TrustSpec(teams=("h1",), max_team_share=1.0))
    assert verdicts["h2"].verdict == verdicts["x"].verdict == "not listed in trust.teams" and verdicts["h1"].kept == 300
    assert len(out) == 600
    out, verdicts = check(parts, TrustSpec(exempt=("x",), max_team_share=1.0))
    assert verdicts["x"].verdict == "exempt" and verdicts["x"].kept == 300 and out == set()


def test_no_team_is_more_than_its_share_of_the_scores_that_train():
    rng = np.random.default_rng(3)
    parts = [scores(rng, "big", 900), scores(rng, "small", 100), scores(rng, "other", 200)]
    out, verdicts = check(parts, TrustSpec(max_team_share=0.5))
    assert verdicts["big"].kept == 300 and "capped" in verdicts["big"].verdict and len(out) == 600
    assert all(i.startswith("big-") for i in out)
    order = rng.permutation(1200)
    shuffled = [tuple(np.concatenate([np.asarray(p[k], dtype=object) for p in parts])[order] for k in range(5))]
    again, _ = check(shuffled, TrustSpec(max_team_share=0.5))
    assert again == out  # chosen by request id, not by the rows' order
    alone, verdicts = check([scores(rng, "big", 900)])
    assert alone == set() and verdicts["big"].kept == 900  # one team: nobody else to protect


def test_the_false_flag_rate_over_many_honest_platforms_stays_within_alpha():
    """Ten honest teams and the judge, 30 comparisons a platform, with ``min_gap`` too small to shield anyone:
    over 60 seeded platforms, the share where some honest team is flagged stays within ``alpha`` (5%) plus
    the seeds' chance (at most 8 of 60: a binomial(60, 0.05) exceeds it 1.4% of the time). Without the
    Bonferroni correction over the comparisons it is about 80%; with each team's own variance instead of the
    pooled one under the null, 20% (a team whose few answers sit near 0 or 1 looked certain)."""
    spec = TrustSpec(min_gap=0.01, alpha=0.05, max_team_share=1.0)
    flagged = 0
    for seed in range(60):
        rng = np.random.default_rng(1000 + seed)
        out, _ = check([scores(rng, f"h{k}", 150) for k in range(10)] + [scores(rng, "j", 300, judge=True)], spec)
        flagged += bool(out)
    assert flagged <= 8, f"{flagged} of 60 honest platforms had a team flagged"


APP_QUALITY = {"chat": {"a": 0.9, "b": 0.5, "c": 0.2}, "code": {"a": 0.2, "b": 0.6, "c": 0.9},
               "legal": {"a": 0.5, "b": 0.9, "c": 0.3}}  # fmt: skip


def app_scores(rng, team: str, app: str, n: int, *, attack: bool = False, judge: bool = False):
    """``n`` requests of ``team`` from one ``app``, whose models' chances of a good answer differ by app,
    scored honestly (or, ``attack``: 1 for a, 0 for the rest); ``judge``: scored by the judge."""
    models = rng.choice(MODELS, n)
    values = np.array([(1.0 if m == "a" else 0.0) if attack else float(rng.random() < APP_QUALITY[app][m]) for m in models])
    return [f"{team}-{app}-{i}" for i in range(n)], [team] * n, list(models), values, np.full(n, not judge), [app] * n


def check_apps(parts, spec=TrustSpec()):
    ids, teams, models, values, users, apps = (sum((list(p[k]) for p in parts), []) for k in range(6))
    return check_teams(ids, teams, models, np.array(values), np.array(users), spec, apps)


def test_teams_on_different_apps_are_compared_like_with_like_and_never_flagged():
    """A platform: each team on its own app, each app with another best model. Every team's mean score per
    model differs from everyone else's by 0.3 to 0.7 -- and every team is honest."""
    rng = np.random.default_rng(3)
    parts = [app_scores(rng, "t-chat", "chat", 400), app_scores(rng, "t-code", "code", 400),
             app_scores(rng, "t-legal", "legal", 400)]  # fmt: skip
    out, verdicts = check_apps(parts)
    assert out == set() and all(v.verdict == "trusted" for v in verdicts.values())
    _, pooled = check_apps([p[:5] + ([None] * len(p[0]),) for p in parts])  # the same scores with no app known
    assert any(v.kept < v.rows for v in pooled.values())  # compared across apps: honest teams' scores left out


def test_within_an_app_a_team_scoring_against_the_judge_is_still_flagged_and_named_with_its_app():
    rng = np.random.default_rng(4)
    parts = [app_scores(rng, "h1", "code", 400), app_scores(rng, "h2", "code", 400),
             app_scores(rng, "x", "code", 600, attack=True), app_scores(rng, "h3", "chat", 400),
             app_scores(rng, "j", "code", 150, judge=True)]  # fmt: skip
    out, verdicts = check_apps(parts)
    assert verdicts["x"].kept == 0 and verdicts["x"].app == "code" and "in app code" in verdicts["x"].line()
    assert out == {f"x-code-{i}" for i in range(600)}
    assert all(verdicts[t].verdict == "trusted" for t in ("h1", "h2", "h3"))


def test_two_teams_alone_that_disagree_on_one_app_lose_that_app_s_scores_and_keep_learning_elsewhere():
    """No judge, no listed team: where the only two teams of an app disagree, which is right cannot be told, so
    neither's scores of that app train -- but their other apps' do: one hostile team cannot freeze a platform."""
    rng = np.random.default_rng(5)
    honest = [app_scores(rng, "h", "code", 400), app_scores(rng, "h", "chat", 300)]
    hostile = [app_scores(rng, "x", "code", 400, attack=True), app_scores(rng, "x", "legal", 300)]
    out, verdicts = check_apps([*honest, *hostile])
    assert out == {f"{t}-code-{i}" for t in ("h", "x") for i in range(400)}  # the disputed app, both sides
    assert (verdicts["h"].kept, verdicts["x"].kept) == (300, 300)
    assert "not in app code" in verdicts["h"].verdict and "not in app code" in verdicts["x"].verdict
