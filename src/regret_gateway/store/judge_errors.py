"""How wrong the LLM judge is, measured where users scored the same requests, and its scores corrected.

On the requests a user and the judge both scored, per model judged: ``false_pass`` is the judge's mean
score where the user failed the answer (score < 0.5), ``false_fail`` one minus its mean score where the
user passed it. A judge score s of that model's answer then stands for the truth through
``(s - false_pass) / (1 - false_pass - false_fail)``: for a pass/fail truth its expectation is the truth's,
whatever the judge's two error rates (for binary scores, the flip correction of the judge's confusion).
The corrected scores may leave [0, 1]; the estimators take them as the rows' outcomes
(``LoggedFeedback.target``). A model with too few pairs of either kind is corrected by the pooled estimate
over all models; without enough pairs at all, the judge is uncalibrated and its scores are used as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.store.queries import JUDGE_SOURCE, judged_by_users

MIN_PAIRS = 20  # pairs the user failed, and as many it passed, before an error rate is estimated
MIN_SEPARATION = 0.2  # 1 - false_pass - false_fail: below it the judge says too little to be corrected
POOLED = "*"


@dataclass(frozen=True)
class JudgeError:
    """The judge's measured error on one model's answers (``model`` "*": all models pooled)."""

    model: str
    user_failed: int  # pairs the user failed (score < 0.5)
    user_passed: int
    false_pass: float | None  # the judge's mean score where the user failed
    false_fail: float | None  # 1 - the judge's mean score where the user passed

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
        return (np.asarray(score, dtype=float) - self.false_pass) / (1.0 - self.false_pass - self.false_fail)

    def describe(self) -> str:
        if self.false_pass is None or self.false_fail is None:
            return f"{self.model}: {self.pairs} pairs (user failed {self.user_failed}, passed {self.user_passed})"
        return (f"{self.model}: {self.pairs} pairs, false pass {100 * self.false_pass:.1f}%, false fail "
                f"{100 * self.false_fail:.1f}%{'' if self.usable else ' (too few pairs to correct)'}")  # fmt: skip


def _error(model: str, user: np.ndarray, judge: np.ndarray) -> JudgeError:
    failed, passed = user < 0.5, user >= 0.5
    fp = float(judge[failed].mean()) if failed.any() else None
    ff = float(1.0 - judge[passed].mean()) if passed.any() else None
    return JudgeError(model, int(failed.sum()), int(passed.sum()), fp, ff)


def judge_errors(session: Session, window: Sequence = ()) -> dict[str, JudgeError]:
    """Per model judged (and ``"*"`` pooled), the judge's error on the requests of ``window`` (conditions on
    :class:`Decision`) that a user scored as well; {} where there are none."""
    models, user, judge = judged_by_users(session, window)
    if not len(models):
        return {}
    out = {POOLED: _error(POOLED, user, judge)}
    for m in sorted(set(models)):
        rows = models == m
        out[m] = _error(m, user[rows], judge[rows])
    return out


def corrected_targets(models: Sequence[str], sources: Sequence[str], scores: np.ndarray,
                      errors: dict[str, JudgeError]) -> tuple[np.ndarray | None, dict[str, int]]:  # fmt: skip
    """The rows' outcomes with every judge score corrected by its model's error (else the pooled one), and
    how many rows each estimate corrected; (None, {}) where nothing was corrected (no usable estimate, or no
    judge score)."""
    target = np.asarray(scores, dtype=float).copy()
    used: dict[str, int] = {}
    judged = np.array([s == JUDGE_SOURCE for s in sources], dtype=bool)
    names = np.array(models, dtype=object)
    for m in sorted(set(names[judged])) if judged.any() else []:
        error = errors.get(m) if errors.get(m) is not None and errors[m].usable else errors.get(POOLED)
        if error is None or not error.usable:
            continue
        rows = judged & (names == m)
        target[rows] = error.correct(target[rows])
        used[error.model] = used.get(error.model, 0) + int(rows.sum())
    return (target, used) if used else (None, {})
