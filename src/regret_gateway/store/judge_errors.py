"""The judge's calibration evidence read from the store: the requests a user and the judge both scored, and
the answers the judge scored twice (the statistics: :mod:`regret_gateway.judge_calibration`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from regret_gateway.judge_calibration import JudgeError, SelfAgreement, agreement_from_repeats, errors_from_pairs
from regret_gateway.store.queries import judged_by_users, judged_twice


def judge_errors(session: Session, window: Sequence = ()) -> dict[str, JudgeError]:
    """The judge's error per model on the requests of ``window`` (conditions on ``Decision``) that a user
    scored as well (:func:`~regret_gateway.judge_calibration.errors_from_pairs`)."""
    return errors_from_pairs(*judged_by_users(session, window))


def self_agreement(session: Session, window: Sequence = ()) -> dict[str, SelfAgreement]:
    """The judge against itself per model on the answers of ``window`` it judged twice
    (:func:`~regret_gateway.judge_calibration.agreement_from_repeats`)."""
    return agreement_from_repeats(*judged_twice(session, window))
