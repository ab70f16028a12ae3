"""``retrain --every``: the scheduler that migrates the store and retrains once, or every period forever."""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Engine

import regret_gateway.retrain.pipeline as pipeline
from regret_gateway.config import Settings
from regret_gateway.retrain.options import RetrainOptions, RetrainResult


def retrain_every(
    settings: Settings,
    engine: Engine,
    options: Callable[[], RetrainOptions],
    period_s: float | None,
    *,
    on_result: Callable[[RetrainResult], None],
    on_unreachable: Callable[[Exception], None],
    progress: Callable[[str], None] | None = None,
) -> RetrainResult | None:
    """``regret-gateway retrain [--every]``'s scheduler: migrate the store (idempotent) and retrain with
    ``options()`` (called each run: a sliding window moves), then, with a period, again every ``period_s``
    seconds forever. A store that cannot be reached is reported to ``on_unreachable`` and, with a period,
    tried again next period; without one the run ends there (None). Returns the one run's result."""
    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.store.migrate import upgrade

    while True:
        try:
            upgrade(settings.store.url)  # idempotent; a new store gets its tables
            result = pipeline.retrain(settings, engine, options(), progress=progress)
        except SQLAlchemyError as exc:
            on_unreachable(exc)
            if period_s is None:
                return None
            time.sleep(period_s)  # keep going: the next run may find the store back
            continue
        on_result(result)
        if period_s is None:
            return result
        time.sleep(period_s)
