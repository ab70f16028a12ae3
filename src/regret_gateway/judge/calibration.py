"""How wrong the LLM judge is, measured where users scored the same requests or where it judged an answer
twice, and its scores corrected.

On the requests a user and the judge both scored, per model judged, the judge's calibration line: the
least-squares fit of its score on the user's, E[s | user score u] = false_pass + (1 - false_pass -
false_fail) u. ``false_pass`` is the judge's expected score for an answer the user scored 0, ``false_fail``
one minus its expected score for one scored 1; with pass/fail user scores they are its mean score where the
user failed the answer and one minus its mean where the user passed it (its two error rates), and with
graded user scores the line uses every grade instead of cutting them at 0.5. A judge score s of that
model's answer then stands for the truth through ``(s - false_pass) / (1 - false_pass - false_fail)``: its
expectation is the truth's wherever the judge's expected score is linear in the truth (a pass/fail truth,
whatever the judge's two error rates: the flip correction of its confusion; or a graded truth the judge
reports, or reports as 1 - u, at rates that do not depend on u).
How much a corrected judge score teaches is the share of its scores' variance the users' scores explain
on the pairs (the line's R^2, ``worth``): the corrected score's variance is the user score's over R^2, so N
judged answers estimate a model's quality about as precisely as R^2 N user-scored ones -- (1 - 2e)^2 for one
judge flipping a balanced pass/fail verdict at rate e (36% at e = 0.2), more for a panel whose mean
averages independent errors (63% for three such judges).
The corrected scores may leave [0, 1]; the estimators take them as the rows' outcomes
(``LoggedFeedback.target``). A model with too few pairs of either kind is corrected by the pooled estimate
over all models; without enough pairs at all, the judge is uncalibrated and its scores are used as they are.

One model's rates rest on its own pairs, a few dozen where users score a few percent of the traffic: at
20 pairs a rate is off by ~9 points, and divided by 1 - false pass - false fail that moves the model's
corrected quality by ~15, enough to rank any model first. So each model's rates are *partially pooled*
(empirical Bayes, DerSimonian-Laird): the model's own rate weighted by tau^2 / (tau^2 + v), v its
sampling variance (the judge's score variance on that side of the line over its pairs), tau^2 how much
the models' true rates differ beyond their sampling noise (estimated from all models' spread), the rest
by the rate on every pair. A judge equally wrong on every model (tau^2 ~ 0) corrects every model by the
pooled rates, which moves every model's quality alike and leaves their order as it is; a judge that
favours a model (its rate far outside the others' noise) keeps that model's own rate.

Where no user scores, the judge's *self-agreement* stands in: the answers it judged twice (``judge.repeat``)
disagree (one pass, one fail) at a rate d, and a judge that flips each verdict independently at rate e,
either way, disagrees with itself at d = 2e(1 - e), so e = (1 - sqrt(1 - 2d)) / 2 is both its false-pass and
its false-fail rate. That sees only the judge's inconsistency: a judge wrong the same way every time (one
that favours a model, or misreads a kind of question) agrees with itself and is not caught; only users'
scores catch it, and they come first: a model is corrected by the users' estimate (its own, else pooled),
then by self-agreement (its own, else pooled), else not at all; a model's own self-agreement rate is pooled
partially with every model's like its users' rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from regret_gateway.data import JUDGE_SOURCE, TargetErrors, corrected_score, flip_rate

MIN_PAIRS = 20  # pairs the user failed, and as many it passed, before an error rate is estimated
MIN_REPEATS = 50  # answers judged twice before the judge's self-agreement estimates its error
MIN_SEPARATION = 0.2  # 1 - false_pass - false_fail: below it the judge says too little to be corrected
POOLED = "*"


@dataclass(frozen=True)
class JudgeError:
    """The judge's measured error on one model's answers (``model`` "*": all models pooled)."""

    model: str
    user_failed: int  # pairs the user failed (score < 0.5)
    user_passed: int
    false_pass: float | None  # the judge's expected score where the user scored 0 (pass/fail: its mean there)
    false_fail: float | None  # 1 - its expected score where the user scored 1
    worth: float | None = None  # the line's R^2: a judged answer teaches like this share of a user-scored one
    own: tuple[float, float] | None = None  # partially pooled (module doc): the rates on the model's own pairs,
    own_weight: tuple[float, float] = (1.0, 1.0)  # their weights in false_pass, false_fail (the rest: ``pooled``'s)
    pooled: "JudgeError | None" = None  # the estimate on every pair

    @property
    def pairs(self) -> int:
        return self.user_failed + self.user_passed

    @property
    def usable(self) -> bool:
        """Enough pairs of both kinds, and a judge that tells passes from failures."""
        return (min(self.user_failed, self.user_passed) >= MIN_PAIRS and self.false_pass is not None
                and self.false_fail is not None and 1 - self.false_pass - self.false_fail >= MIN_SEPARATION)  # fmt: skip

    def correct(self, score: np.ndarray) -> np.ndarray:
        """The judge's scores as estimates of the truth (unbiased for a pass/fail truth)."""
        assert self.false_pass is not None and self.false_fail is not None
        return corrected_score(score, self.false_pass, self.false_fail)

    def describe(self) -> str:
        if self.false_pass is None or self.false_fail is None:
            return f"{self.model}: {self.pairs} pairs (user failed {self.user_failed}, passed {self.user_passed})"
        worth = "" if self.worth is None else f", a judged answer worth {100 * self.worth:.0f}% of a user score"
        own = "" if self.own is None else (f" (on its own pairs {100 * self.own[0]:.1f}% and {100 * self.own[1]:.1f}%, "
                                           "pooled with every model's)")  # fmt: skip
        return (f"{self.model}: {self.pairs} pairs, false pass {100 * self.false_pass:.1f}%, false fail "
                f"{100 * self.false_fail:.1f}%{own}{worth}{'' if self.usable else ' (too few pairs to correct)'}")  # fmt: skip


@dataclass(frozen=True)
class SelfAgreement:
    """The judge against itself on one model's answers it judged twice (``model`` "*": all pooled): how often
    its two verdicts disagree, and the flip rate that implies (module doc)."""

    model: str
    repeats: int  # answers judged twice
    disagree: float  # share whose two scores fall on either side of 0.5
    pooled_rate: float | None = None  # partially pooled (module doc): the rate used, else its own
    own_weight: float = 1.0  # the weight of its own rate in it (the rest: ``pooled``'s)
    pooled: "SelfAgreement | None" = None

    @property
    def own_rate(self) -> float:
        """e with 2e(1 - e) = ``disagree`` (:func:`~regret_gateway.data.flip_rate`): on its own repeats."""
        return float(flip_rate(self.disagree))

    @property
    def flip_rate(self) -> float:
        """The rate that corrects its scores: its own, or partially pooled with every model's."""
        return self.own_rate if self.pooled_rate is None else self.pooled_rate

    @property
    def false_pass(self) -> float:
        return self.flip_rate

    @property
    def false_fail(self) -> float:
        return self.flip_rate

    @property
    def usable(self) -> bool:
        return self.repeats >= MIN_REPEATS and 1 - 2 * self.flip_rate >= MIN_SEPARATION

    def correct(self, score: np.ndarray) -> np.ndarray:
        return corrected_score(score, self.flip_rate, self.flip_rate)

    def describe(self) -> str:
        own = "" if self.pooled_rate is None else f" (on its own repeats {100 * self.own_rate:.1f}%, pooled with every model's)"
        return (f"{self.model}: {self.repeats} judged twice, same pass/fail {100 * (1 - self.disagree):.1f}%, "
                f"implied error {100 * self.flip_rate:.1f}% either way{own}{'' if self.usable else ' (too few to correct)'}")  # fmt: skip


def _error(model: str, user: np.ndarray, judge: np.ndarray) -> JudgeError:
    """The judge's calibration line on these pairs (module doc); no rates where the users gave one grade."""
    failed = user < 0.5
    spread = float(np.var(user))
    if spread <= 0.0:
        return JudgeError(model, int(failed.sum()), int((~failed).sum()), None, None)
    slope = float(np.mean((user - user.mean()) * (judge - judge.mean()))) / spread
    judge_spread = float(np.var(judge))
    worth = min(1.0, slope**2 * spread / judge_spread) if judge_spread > 0 else None  # R^2 (module doc)
    if np.isin(user, (0.0, 1.0)).all():  # pass/fail: the line through the two means, exact (no -2e-16 rates)
        return JudgeError(model, int(failed.sum()), int((~failed).sum()), float(judge[failed].mean()),
                          1.0 - float(judge[~failed].mean()), worth)  # fmt: skip
    intercept = float(judge.mean()) - slope * float(user.mean())
    return JudgeError(model, int(failed.sum()), int((~failed).sum()), intercept, 1.0 - intercept - slope, worth)


def _per_model(models: np.ndarray, first: np.ndarray, second: np.ndarray, measure) -> dict:
    """``measure(model, first, second)`` pooled over all rows (``"*"``) and on each model's rows; {} for no row."""
    if not len(models):
        return {}
    out = {POOLED: measure(POOLED, first, second)}
    for m in sorted(set(models)):
        rows = models == m
        out[m] = measure(m, first[rows], second[rows])
    return out


def _shrunk(rates: np.ndarray, counts: np.ndarray, center: float, spread: float) -> np.ndarray:
    """The weight of each model's own rate (``rates``, on ``counts`` pairs, each score of variance ``spread``)
    against ``center``: tau^2 / (tau^2 + v), DerSimonian-Laird's tau^2 of the rates' spread beyond their
    sampling variances v = spread / count (module doc)."""
    v = max(spread, 1e-12) / np.maximum(counts, 1)
    w = 1.0 / v
    q = float((w * (rates - center) ** 2).sum())
    scale = float(w.sum() - (w**2).sum() / w.sum())
    tau2 = max(0.0, (q - (len(rates) - 1)) / scale) if len(rates) > 1 and scale > 0 else 0.0
    return tau2 / (tau2 + v)


def _partially_pooled(errors: dict[str, JudgeError], user: np.ndarray, judge: np.ndarray) -> dict[str, JudgeError]:
    """Each model's rates partially pooled with every pair's (module doc)."""
    pooled = errors.get(POOLED)
    own = [e for m, e in errors.items() if m != POOLED and e.false_pass is not None and e.false_fail is not None]
    if pooled is None or pooled.false_pass is None or pooled.false_fail is None or not own:
        return errors
    failed = user < 0.5
    if np.isin(user, (0.0, 1.0)).all():  # each side's score variance around its rate
        spread_fp, spread_ff = float(np.var(judge[failed])), float(np.var(judge[~failed]))
    else:  # graded: the variance around the line
        line = pooled.false_pass + (1.0 - pooled.false_pass - pooled.false_fail) * user
        spread_fp = spread_ff = float(np.var(judge - line))
    fp, ff = (np.array([e.false_pass for e in own]), np.array([e.false_fail for e in own]))
    w_fp = _shrunk(fp, np.array([e.user_failed for e in own]), pooled.false_pass, spread_fp)
    w_ff = _shrunk(ff, np.array([e.user_passed for e in own]), pooled.false_fail, spread_ff)
    out = dict(errors)
    for e, a, b, wa, wb in zip(own, fp, ff, w_fp, w_ff):
        out[e.model] = replace(e, false_pass=float(pooled.false_pass + wa * (a - pooled.false_pass)),
                               false_fail=float(pooled.false_fail + wb * (b - pooled.false_fail)),
                               own=(float(a), float(b)), own_weight=(float(wa), float(wb)), pooled=pooled)  # fmt: skip
    return out


def errors_from_pairs(models: np.ndarray, user: np.ndarray, judge: np.ndarray) -> dict[str, JudgeError]:
    """Per model judged (and ``"*"`` pooled), the judge's error on the requests a user scored as well --
    ``models`` (n,) the model each answer came from, ``user`` and ``judge`` (n,) the two scores -- each model's
    partially pooled with every pair's (module doc); {} where there are none."""
    return _partially_pooled(_per_model(models, user, judge, _error), user, judge)


def _agreement(model: str, first: np.ndarray, repeat: np.ndarray) -> SelfAgreement:
    return SelfAgreement(model, len(first), float(((first >= 0.5) != (repeat >= 0.5)).mean()))


def _agreement_pooled(agreement: dict[str, SelfAgreement]) -> dict[str, SelfAgreement]:
    """Each model's flip rate partially pooled with every repeat's (module doc): a rate's sampling variance
    is its disagreement's, d (1 - d) / repeats, times (de/dd)^2 = 1 / (2 (1 - 2e))^2."""
    pooled = agreement.get(POOLED)
    own = [a for m, a in agreement.items() if m != POOLED]
    if pooled is None or not own or pooled.own_rate >= 0.5:
        return agreement
    d, e = pooled.disagree, pooled.own_rate
    rates = np.array([a.own_rate for a in own])
    weight = _shrunk(rates, np.array([a.repeats for a in own]), e, d * (1 - d) / (2 * (1 - 2 * e)) ** 2)
    out = dict(agreement)
    for a, rate, w in zip(own, rates, weight):
        out[a.model] = replace(a, pooled_rate=float(e + w * (rate - e)), own_weight=float(w), pooled=pooled)
    return out


def agreement_from_repeats(models: np.ndarray, first: np.ndarray, repeat: np.ndarray) -> dict[str, SelfAgreement]:
    """Per model judged (and ``"*"`` pooled), the judge against itself on the answers it judged twice (their
    first and repeated scores), each model's rate partially pooled with every repeat's (module doc); {}
    where there are none."""
    return _agreement_pooled(_per_model(models, first, repeat, _agreement))


Estimate = JudgeError | SelfAgreement
E = TypeVar("E", JudgeError, SelfAgreement)


def estimate_for(model: str, *estimates: dict[str, Estimate]) -> tuple[str, Estimate] | None:
    """The estimate that corrects ``model``'s judge scores, with its basis ("users" or "self-agreement"):
    the first usable of each dict's own estimate of the model, then its pooled one, in the dicts' order."""
    for found in estimates:
        for key in (model, POOLED):
            if (e := found.get(key)) is not None and e.usable:
                return ("users" if isinstance(e, JudgeError) else "self-agreement"), e
    return None


def _evidence(e: Estimate) -> tuple[int, int, int, float]:
    """(user-failed pairs, user-passed pairs, answers judged twice, their disagreement) an estimate rests on."""
    return (e.user_failed, e.user_passed, 0, 0.0) if isinstance(e, JudgeError) else (0, 0, e.repeats, e.disagree)


def _pooled_of(applied: Sequence[Estimate], kind: type[E]) -> E | None:
    """The ``kind`` estimate on every model that the applied ones of that kind pool with (or are), if any."""
    for e in applied:
        if isinstance(e, kind) and (found := e if e.model == POOLED else e.pooled) is not None:
            return found
    return None


def _own_part(e: Estimate) -> tuple[tuple[float, float], tuple[float, float]]:
    """(its own false pass and false fail, their weights): a partially pooled model's; the pooled estimate's
    weight 0 (all the pooled draw); an unpooled estimate's weight 1."""
    if isinstance(e, SelfAgreement):
        w = 0.0 if e.model == POOLED else e.own_weight
        return (e.own_rate, e.own_rate), (w, w)
    if e.own is not None:
        return e.own, e.own_weight
    assert e.false_pass is not None and e.false_fail is not None  # an applied estimate is usable
    return (e.false_pass, e.false_fail), ((0.0, 0.0) if e.model == POOLED else (1.0, 1.0))


def _rates(e: JudgeError) -> tuple[float, float, int, int]:
    """(false pass, false fail, user-failed pairs, user-passed pairs) of an estimate with rates."""
    assert e.false_pass is not None and e.false_fail is not None
    return e.false_pass, e.false_fail, e.user_failed, e.user_passed


def corrected_targets(models: Sequence[str], sources: Sequence[str], scores: np.ndarray,
                      *estimates: dict[str, Estimate]) -> tuple[np.ndarray | None, dict[str, int], TargetErrors | None]:  # fmt: skip
    """The rows' outcomes with every judge score corrected by :func:`estimate_for` its model (``estimates``
    in order of preference: the users' errors, then self-agreement), how many rows each estimate corrected
    ("self-agreement *" for a pooled self-agreement), and how uncertain each correction is (for the gate's
    intervals); (None, {}, None) where nothing was corrected."""
    raw = np.asarray(scores, dtype=float)
    target = raw.copy()
    used: dict[str, int] = {}
    group = np.full(len(raw), -1)
    applied: list[Estimate] = []
    judged = np.array([s == JUDGE_SOURCE for s in sources], dtype=bool)
    names = np.array(models, dtype=object)
    for m in sorted(set(names[judged])) if judged.any() else []:
        if (found := estimate_for(m, *estimates)) is None:
            continue
        basis, error = found
        rows = judged & (names == m)
        target[rows] = error.correct(target[rows])
        key = error.model if basis == "users" else f"{basis} {error.model}"
        used[key] = used.get(key, 0) + int(rows.sum())
        if error not in applied:
            applied.append(error)
        group[rows] = applied.index(error)
    if not used:
        return None, {}, None
    failed, passed, repeats, disagree = zip(*(_evidence(e) for e in applied))
    pooled, repeated = _pooled_of(applied, JudgeError), _pooled_of(applied, SelfAgreement)
    own, weight = zip(*(_own_part(e) for e in applied))
    errors = TargetErrors(group=group, raw=raw, false_pass=np.array([e.false_pass for e in applied], dtype=float),
                          false_fail=np.array([e.false_fail for e in applied], dtype=float), failed=np.array(failed),
                          passed=np.array(passed), repeats=np.array(repeats), disagree=np.array(disagree),
                          own_false_pass=np.array([o[0] for o in own], dtype=float),
                          own_false_fail=np.array([o[1] for o in own], dtype=float), own_weight=np.array(weight, dtype=float),
                          pooled=None if pooled is None else _rates(pooled),
                          pooled_repeats=None if repeated is None else (repeated.repeats, repeated.disagree))  # fmt: skip
    return target, used, errors
