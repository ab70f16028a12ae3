"""The judge's error (trainset/window.py: what `status` shows and retrain corrects by), measured where users scored the same requests, and its scores corrected before
retrain learns from them: a judge that favours one model is caught and corrected on the overlap. SQLite
and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy.orm import Session

from regret_gateway.judge.calibration import POOLED
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.writes import record_decisions, record_feedback
from regret_gateway.trainset.window import training_set

PASS_RATE = {"a": 0.3, "b": 0.6, "c": 0.8}  # the truth: how often each model's answer is right
FALSE_PASS = {"a": 0.5, "b": 0.05, "c": 0.05}  # the judge passes half of model a's wrong answers
FALSE_FAIL = {"a": 0.1, "b": 0.05, "c": 0.05}


def _judged(rng, models, truth, false_pass=FALSE_PASS, false_fail=FALSE_FAIL) -> np.ndarray:
    flip = np.array([rng.random() < (false_fail[m] if t else false_pass[m]) for m, t in zip(models, truth)])
    return np.where(flip, 1 - truth, truth)


def _store(engine, prefix: str, models: np.ndarray, scores: list[tuple[int, float, str]]) -> None:
    """One decision per entry of ``models`` (ids ``prefix`` + index), then the ``(index, score, source)`` scores."""
    with Session(engine) as s, s.begin():
        record_decisions(s, [DecisionRecord(request_id=f"{prefix}{i}", tier="t", lam=0.0, embedding_model="e",
                                            embedding=np.full(4, i % 7, dtype=np.float32), chosen_model=str(m),
                                            propensity=1 / 3, outcome=OutcomeRecord(f"{prefix}{i}", cost_usd=1e-4))
                             for i, m in enumerate(models)])  # fmt: skip
        record_feedback(s, [FeedbackRecord(f"{prefix}{i}", float(v), source=src) for i, v, src in scores])


def log_judged(engine, n: int, user_share: float, seed: int = 0, repeat_share: float = 0.0, false_pass=FALSE_PASS,
               false_fail=FALSE_FAIL) -> dict[str, np.ndarray]:  # fmt: skip
    """n requests spread over the models, every one scored by the judge, ``user_share`` of them by a user
    too (the truth), ``repeat_share`` judged a second time (its verdict flipped independently again).
    Returns each model's true scores."""
    rng = np.random.default_rng(seed)
    models = np.array(list(PASS_RATE))[rng.integers(3, size=n)]
    truth = np.array([rng.random() < PASS_RATE[m] for m in models], dtype=float)
    judged = _judged(rng, models, truth, false_pass, false_fail)
    repeated = np.flatnonzero(rng.random(n) < repeat_share)
    again = _judged(rng, models[repeated], truth[repeated], false_pass, false_fail)
    users = np.flatnonzero(rng.random(n) < user_share)
    _store(engine, "j", models, [(i, judged[i], "judge") for i in range(n)]
           + [(int(i), a, "judge-repeat") for i, a in zip(repeated, again)]
           + [(int(i), truth[i], "user") for i in users])  # fmt: skip
    return {m: truth[models == m] for m in PASS_RATE}


def test_a_judge_that_favours_one_model_is_caught_and_corrected_on_the_overlap(engine):
    # half the requests scored by users as well: model a's corrected mean moves by its false pass's error
    # divided by 1 - 0.5 - 0.1, so a quarter's ~220 failed pairs would leave it ~0.06 off by chance alone
    truth = log_judged(engine, 4000, user_share=0.5)
    with Session(engine) as s:
        errors = training_set(s).judge_errors
        ts = training_set(s, feedback=("judge",))  # learn from the judge alone; the users' scores calibrate it
    assert errors["a"].false_pass == pytest.approx(0.5, abs=0.1) and errors["a"].false_fail == pytest.approx(0.1, abs=0.06)
    for m in ("b", "c"):
        assert errors[m].false_pass < 0.15 and errors[m].false_fail < 0.15 and errors[m].usable
    assert errors[POOLED].pairs == sum(e.pairs for m, e in errors.items() if m != POOLED)
    lg = ts.logged
    assert ts.judge_corrected == {"a": len(truth["a"]), "b": len(truth["b"]), "c": len(truth["c"])}
    for t, m in enumerate(lg.model_names):
        rows = lg.action == t
        # what retrain learns a model is worth: the corrected judge scores' mean, the truth's within noise
        assert lg.quality_target[rows].mean() == pytest.approx(truth[m].mean(), abs=0.06), m
    a = lg.model_names.index("a")
    assert lg.quality[lg.action == a].mean() > truth["a"].mean() + 0.25  # the raw judge rates model a far too high


def test_graded_scores_are_calibrated_on_every_grade_not_cut_at_one_half(engine):
    """Graded truth (a share of the answer right), a judge that reports it or, 15% of the time, its opposite
    (1 - u), users sending the graded truth on a quarter of the requests: the calibration line over every
    grade measures the judge's error and its corrected scores average to each model's truth. Cutting the
    users' grades at 0.5 reads a partly right answer as a failure the judge often passed (false pass ~0.3
    here, either way) and corrects model a to half its truth and model c above 1."""
    rng = np.random.default_rng(3)
    n, flip = 9000, 0.15
    models = np.array(list(PASS_RATE))[rng.integers(3, size=n)]
    truth = np.array([rng.beta(2 * PASS_RATE[m], 2 * (1 - PASS_RATE[m])) for m in models])
    judged = np.where(rng.random(n) < flip, 1 - truth, truth)
    users = np.flatnonzero(rng.random(n) < 0.25)
    _store(engine, "g", models, [(i, judged[i], "judge") for i in range(n)] + [(int(i), truth[i], "user") for i in users])
    with Session(engine) as s:
        errors = training_set(s).judge_errors
        lg = training_set(s, feedback=("judge",)).logged
    for m in (*PASS_RATE, POOLED):
        assert errors[m].false_pass == pytest.approx(flip, abs=0.06), m
        assert errors[m].false_fail == pytest.approx(flip, abs=0.06), m
    for t, m in enumerate(lg.model_names):
        assert lg.quality_target[lg.action == t].mean() == pytest.approx(truth[models == m].mean(), abs=0.04), m


def test_a_judge_never_wrong_one_way_is_measured_at_zero_and_its_uncertainty_redrawn(engine):
    """A judge that never passes model b's wrong answers: its false pass is 0 exactly (not -2e-16 from a
    least-squares line), and the gate's bootstrap redraws it -- and a graded line's rate below 0 -- without
    failing, centred on the rate used."""
    from regret_gateway.data import TargetErrors

    log_judged(engine, 3000, user_share=0.3, false_pass={"a": 0.5, "b": 0.0, "c": 0.05})
    with Session(engine) as s:
        errors = training_set(s).judge_errors
        ts = training_set(s, feedback=("judge",))
    # on its own pairs exactly 0; pooled partially with the other models' (a's 0.5) it stays near 0
    assert errors["b"].own is not None and errors["b"].own[0] == 0.0 and errors["b"].user_failed >= 20
    assert 0.0 <= errors["b"].false_pass < 0.02
    slope, intercept = ts.logged.target_errors.shifts(200, seed=0)
    assert np.isfinite(slope).all() and np.isfinite(intercept).all()
    graded = TargetErrors(group=np.zeros(4, dtype=int), raw=np.ones(4), false_pass=np.array([-0.03]),
                          false_fail=np.array([0.1]), failed=np.array([60]), passed=np.array([60]),
                          repeats=np.array([0]), disagree=np.array([0.0]))  # fmt: skip
    slope, intercept = graded.shifts(2000, seed=0)
    assert np.isfinite(slope).all() and abs(np.median(slope + intercept)) < 0.02  # a pass's target: centred


def test_the_pairs_say_what_a_judged_answer_is_worth_and_a_panel_is_worth_more_than_one_judge(engine):
    """On the pairs, the share of the judge's score variance the users' scores explain: a judged answer's
    worth in user scores. Every answer of model ``one`` judged by one judge wrong 20% of the time, of model
    ``panel`` by the mean of three such judges: the same error rates (the same correction), but the panel's
    mean teaches like (1 - 2e)^2 v / ((1 - 2e)^2 v + e(1 - e) / 3) = 63% of a user score, one judge's 36%."""
    rng, n, e = np.random.default_rng(5), 3000, 0.2
    truth = (rng.random(2 * n) < 0.5).astype(float)
    verdicts = np.where(rng.random((3, 2 * n)) < e, 1 - truth, truth)
    judged = np.concatenate([verdicts[0, :n], verdicts[:, n:].mean(0)])
    models = np.array(["one"] * n + ["panel"] * n)
    _store(engine, "p", models, [(i, judged[i], "judge") for i in range(2 * n)] + [(i, truth[i], "user") for i in range(2 * n)])
    with Session(engine) as s:
        errors = training_set(s).judge_errors
    v = truth.var()
    for model, k in (("one", 1), ("panel", 3)):
        assert errors[model].false_pass == pytest.approx(e, abs=0.03) and errors[model].false_fail == pytest.approx(e, abs=0.03)
        expected = (1 - 2 * e) ** 2 * v / ((1 - 2 * e) ** 2 * v + e * (1 - e) / k)
        assert errors[model].worth == pytest.approx(expected, abs=0.04), model
    assert errors["panel"].worth > errors["one"].worth + 0.2
    assert f"worth {100 * errors['one'].worth:.0f}% of a user score" in errors["one"].describe()


def _equally_wrong(rng, e: float, n: int = 9000):
    """Six models of equal quality (60% right), each answer judged once by a judge that flips it at rate e."""
    names = np.array([f"m{k}" for k in range(6)])
    models = names[rng.integers(6, size=n)]
    truth = (rng.random(n) < 0.6).astype(float)
    return names, models, truth, np.where(rng.random(n) < e, 1 - truth, truth)


def _assert_each_model_corrected_alike(ts, names, models, truth, min_corr: float) -> None:
    """Every model's corrected quality within 5 points of its truth, and the bootstrap's redrawn corrections
    moving together (correlated above ``min_corr``; independent redraws: ~0)."""
    lg = ts.logged
    for t, m in enumerate(lg.model_names):
        assert lg.quality_target[lg.action == t].mean() == pytest.approx(truth[models == m].mean(), abs=0.05), m
    slope, _ = lg.target_errors.shifts(400, seed=0)
    assert slope.shape[1] == len(names) and np.corrcoef(slope.T).min() > min_corr


def test_a_judge_equally_wrong_on_every_model_corrects_each_by_the_pooled_rates(engine):
    """Users score 5% of the answers: a few dozen pairs a model, whose own error rates come out up to ~10
    points off the judge's true 20%. Divided by 1 - 2e, that would move a model's corrected quality by up to
    ~15 points and reorder models of equal quality; pooled partially with every pair (the models' rates
    differ by no more than their noise), each model is corrected by about the pooled rates, its quality
    estimated within 5 points, and the gate's bootstrap redraws one error for all of them."""
    rng, e = np.random.default_rng(3), 0.2
    names, models, truth, judged = _equally_wrong(rng, e)
    users = np.flatnonzero(rng.random(len(models)) < 0.05)
    _store(engine, "q", models, [(i, v, "judge") for i, v in enumerate(judged)] + [(int(i), truth[i], "user") for i in users])
    with Session(engine) as s:
        errors = training_set(s).judge_errors
        ts = training_set(s, feedback=("judge",))
    _assert_each_model_corrected_alike(ts, names, models, truth, min_corr=0.8)
    own = np.array([errors[m].own or (errors[m].false_pass, errors[m].false_fail) for m in names])
    assert np.abs(own - e).max() > 0.06  # the noise pooling removes: some model's own rate is far off
    for m in names:
        assert errors[m].usable and errors[m].own_weight[0] < 0.3 and errors[m].own_weight[1] < 0.3, errors[m]
        assert abs(errors[m].false_pass - errors[POOLED].false_pass) < 0.03, errors[m]


def test_a_judge_equally_inconsistent_on_every_model_corrects_each_by_the_pooled_self_agreement(engine):
    """No user scores; the judge scores a drawn 4.5% of its answers twice: ~70 repeats a model, whose own
    implied flip rates scatter by several points around the true 20% (unpooled, one model's quality came
    out 9 points off). Pooled partially with every repeat,
    each model is corrected by about the pooled rate and its quality estimated within 5 points; the gate's
    bootstrap redraws one rate for all of them."""
    rng, e = np.random.default_rng(0), 0.2
    names, models, truth, judged = _equally_wrong(rng, e)
    repeated = np.flatnonzero(rng.random(len(models)) < 0.045)
    again = np.where(rng.random(len(repeated)) < e, 1 - truth[repeated], truth[repeated])
    _store(engine, "r", models, [(i, v, "judge") for i, v in enumerate(judged)]
           + [(int(i), a, "judge-repeat") for i, a in zip(repeated, again)])  # fmt: skip
    with Session(engine) as s:
        agreement = training_set(s).judge_self_agreement
        ts = training_set(s, feedback=("judge",))
    _assert_each_model_corrected_alike(ts, names, models, truth, min_corr=0.5)
    assert max(abs(agreement[m].own_rate - e) for m in names) > 0.05  # the scatter pooling removes
    for m in names:
        assert agreement[m].usable and agreement[m].own_weight < 0.3, agreement[m]
        assert abs(agreement[m].flip_rate - agreement[POOLED].flip_rate) < 0.03, agreement[m]


def test_without_user_scores_the_judge_is_uncalibrated_and_used_as_it_is(engine):
    log_judged(engine, 600, user_share=0.0)
    with Session(engine) as s:
        ts = training_set(s)
        assert training_set(s).judge_errors == {}
    assert ts.judge_corrected == {} and ts.logged.target is None
    np.testing.assert_array_equal(ts.logged.quality_target, ts.logged.quality)


def test_the_report_says_why_the_judge_s_scores_were_not_corrected(engine):
    from regret_gateway.retrain import judge_calibration

    log_judged(engine, 4000, user_share=0.25)
    with Session(engine) as s:
        on, off = (judge_calibration(training_set(s, feedback=("judge",), calibrate_judge=c)) for c in (True, False))
    assert on["calibrated"] and sum(on["corrected_rows"].values()) == on["rows"]
    assert not off["calibrated"] and "(--no-judge-calibration)" in off["why"], off


SAME_ERROR = dict.fromkeys(PASS_RATE, 0.15)  # a judge wrong 15% of the time either way, on every model


def test_without_users_the_judge_s_self_agreement_measures_and_corrects_its_error(engine):
    truth = log_judged(engine, 6000, user_share=0.0, repeat_share=0.3, false_pass=SAME_ERROR, false_fail=SAME_ERROR)
    with Session(engine) as s:
        assert training_set(s).judge_errors == {}  # no user scored anything
        agreement = training_set(s).judge_self_agreement
        ts = training_set(s)
        raw = training_set(s, calibrate_judge=False)
    for m in PASS_RATE:  # 2e(1 - e) = 0.255 of ~600 twice-judged answers disagree: e within a few points of 0.15
        assert agreement[m].flip_rate == pytest.approx(0.15, abs=0.05) and agreement[m].usable, agreement[m].describe()
    assert agreement[POOLED].flip_rate == pytest.approx(0.15, abs=0.025)
    assert ts.judge_corrected == {f"self-agreement {m}": len(truth[m]) for m in PASS_RATE}
    lg = ts.logged
    assert ts.rows_by_source() == {"judge": 6000}  # a repeat score never teaches: each request learns from its first
    for t, m in enumerate(lg.model_names):
        rows = lg.action == t
        assert lg.quality_target[rows].mean() == pytest.approx(truth[m].mean(), abs=0.05), m
        # uncorrected, every gap between models shrinks by 1 - 2e = 0.7: model a is rated far too high
        if m == "a":
            assert raw.logged.quality_target[rows].mean() > truth[m].mean() + 0.05
    assert raw.judge_corrected == {} and raw.judge_self_agreement[POOLED].usable


def test_users_scores_come_before_self_agreement(engine):
    log_judged(engine, 4000, user_share=0.25, repeat_share=0.3)
    with Session(engine) as s:
        ts = training_set(s, feedback=("judge",))
    assert set(ts.judge_corrected) == {"a", "b", "c"}  # each by the users' estimate, none by self-agreement
    assert all(a.usable for a in ts.judge_self_agreement.values())  # though self-agreement could have


def test_the_held_out_rows_carry_the_correction_s_uncertainty_to_the_gate(engine):
    """retrain's held-out rows (retrain.fits.held_out_rows) hand each row's correction, and what it rests
    on, to the gate's estimator, in the folds' order."""
    from types import SimpleNamespace

    from regret_gateway.retrain.fits import OutOfFoldFits, held_out_rows

    log_judged(engine, 600, user_share=0.0, repeat_share=0.5, false_pass=SAME_ERROR, false_fail=SAME_ERROR)
    with Session(engine) as s:
        lg = training_set(s).logged
    errors = lg.target_errors
    assert errors is not None and (errors.group >= 0).all() and errors.repeats.sum() > 0

    def held_out(logs):
        return SimpleNamespace(quality_hat=np.full((logs.n_samples, 3), 0.5), cost_hat=np.zeros((logs.n_samples, 3)),
                               propensity=logs.propensity)  # fmt: skip

    folds = [np.arange(300, 600), np.arange(300)]
    learner = SimpleNamespace(nuisance_=SimpleNamespace(held_out=held_out))
    data = held_out_rows(OutOfFoldFits(lg, folds, [learner, learner], np.arange(600)), None).data
    assert data.target_errors is not None
    np.testing.assert_array_equal(data.target_errors.raw, lg.quality[np.concatenate(folds)])
    assert data.shifts(50, 0)[0].shape == (50, len(errors.false_pass))
