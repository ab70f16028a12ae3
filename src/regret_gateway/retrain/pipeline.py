"""The pipeline once: read, check, fit, evaluate, gate, publish, report (the package's docstring says each step)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from regret_gateway.artifacts import active_version_id
from regret_gateway.config import Settings
from regret_gateway.nn.training import step_dtype
from regret_gateway.retrain.checks import check_data, judge_calibration
from regret_gateway.retrain.executor import executor_named
from regret_gateway.retrain.fits import FULL_BATCH_ROWS, default_folds, held_out_rows, out_of_fold_fits
from regret_gateway.retrain.frontier import budget_ladders
from regret_gateway.retrain.gate import evaluate
from regret_gateway.retrain.options import RetrainOptions, RetrainRefused, RetrainResult, RetrainStatus
from regret_gateway.retrain.publish import active_router, publish, serving_now
from regret_gateway.retrain.report import write_report
from regret_gateway.store.records import team_key


def read_training_set(settings: Settings, engine: Engine, opts: RetrainOptions):
    """The window's training set under retrain's rules (trainset/window.py), read from the store or, with
    ``opts.parts``, from its Parquet day parts."""
    from regret_gateway.store.parts import PartsRows
    from regret_gateway.trainset.window import training_set

    with Session(engine) as session:
        return training_set(
            session if opts.parts is None else PartsRows(opts.parts),
            model_names=settings.models,
            since=opts.since,
            until=opts.until,
            team=opts.team,
            embedding_model=settings.embedder.embedding_id,
            feedback=opts.feedback,
            max_rows=opts.max_rows,
            calibrate_judge=opts.calibrate_judge,
            trust=settings.trust,
        )


def retrain(
    settings: Settings, engine: Engine, opts: RetrainOptions = RetrainOptions(), *, progress: Callable[[str], None] | None = None
) -> RetrainResult:
    """Run the whole pipeline once: read, check, fit, evaluate, gate, publish, report. Never raises for bad
    data: a refusal is a result with status ``REFUSED``. ``progress`` is told each step as it starts and ends
    (one line each: the CLI prints them, so a long retrain is not silent)."""
    say = progress or (lambda line: None)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    root = Path(settings.artifacts_dir)
    active_id = active_version_id(root)
    say("reading the logs")
    ts = read_training_set(settings, engine, opts)
    timings["read"] = time.perf_counter() - t0
    say(f"read {ts.n_rows:,} usable rows in {timings['read']:.1f} s")
    trust = [check.line() for check in ts.team_checks.values()]  # whose user scores train (regret_gateway.trust)
    try:
        if len(settings.models) < 2:
            raise RetrainRefused("`models` must list at least 2 models")
        data_info = {**check_data(ts.logged, ts.skipped, opts, first=active_id is None, loggers=ts.logger_codes(),
                                  favoured=ts.favoured, distributions=ts.distributions), "rows_by_source": ts.rows_by_source(),
                     "feedback_spend_usd": ts.spend_by_source, "sampled_from": ts.sampled_from,
                     "judge": judge_calibration(ts), "trust": trust}  # fmt: skip
    except RetrainRefused as exc:
        return _refused(exc, ts, active_id, trust, opts.out or root / "reports")
    logged = ts.logged
    tiers = settings.tiers_by_lambda()
    t1 = time.perf_counter()
    k = default_folds(logged.n_samples) if opts.folds is None else opts.folds

    def fitting(fold: int, of: int, rows: int) -> None:
        say(f"fit {fold} of {of} on {rows:,} rows ({time.perf_counter() - t1:.1f} s so far)")

    fits = out_of_fold_fits(logged, [spec.lam for _, spec in tiers], folds=k, every=opts.cross_fit, seed=opts.seed,
                            on_fit=fitting, precision=opts.precision, executor=executor_named(opts.executor))  # fmt: skip
    loggers = ts.logger_codes()  # each row's logging policy (tier and router version), as the estimators number them
    held = held_out_rows(fits, loggers, ts.favoured, ts.distributions)
    data_info["evaluation"] = (
        f"cross-fitted, {k} folds: every row held out once" if opts.cross_fit else f"1/{k} of the rows held out"
    )
    dtype = str(step_dtype(opts.precision)).removeprefix("torch.")
    data_info["precision"] = f"{opts.precision}: fits past {FULL_BATCH_ROWS:,} rows multiply in {dtype}, smaller ones in float32"
    timings["fit"] = time.perf_counter() - t1
    say(f"fitted in {timings['fit']:.1f} s; evaluating every tier's candidates on {held.logs.n_samples:,} held-out rows")
    t2 = time.perf_counter()
    active = active_router(settings, active_id, data_info)
    populations = {name: rows[fits.order] for name, rows in ts.populations([name for name, _ in tiers]).items()}
    rows, router = evaluate(
        fits, tiers, serving_now(active, logged.model_names), loggers, margin=opts.margin, force=opts.force,
        n_boot=opts.n_boot, seed=opts.seed, regions=opts.regions, held=held, size=settings.embedder.size,
        code=settings.embedder.context_code, populations=populations,
    )  # fmt: skip
    timings["evaluate"] = time.perf_counter() - t2
    say(f"evaluated in {timings['evaluate']:.1f} s; publishing")
    teams = np.array(ts.teams, dtype=object)[fits.order]
    budgeted = {t: (np.flatnonzero(teams == team_key(t)), spec.budget.per)
                for t, spec in settings.teams.items() if spec.budget is not None}  # fmt: skip
    router = router.with_ladders(budget_ladders(
        [(name, spec.lam) for name, spec in tiers], settings.models, router, held.logs.X, held.data, budgeted,
        ts.created_at[fits.order], n_boot=opts.n_boot, seed=opts.seed,
    ))  # fmt: skip
    # published even when every tier keeps what it serves: the new version carries this retrain's utility
    # estimates and each tier's contenders, which exploration reads; with the old ones it would keep exploring
    # where the first retrain pointed, and the comparisons the gate has to make next would get no new rows
    path = publish(settings, engine, router, rows, data_info)
    if active is not None and not any(r.changed for r in rows):
        status = RetrainStatus.KEPT
        reason = (
            f"no candidate is confidently better than what each tier serves -- the active router stays (republished as "
            f"{path.name} with this retrain's utility estimates for exploration): "
            + "; ".join(f"{r.tier}: {r.reason}" for r in rows)
        )
    else:
        status, reason = RetrainStatus.PUBLISHED, "; ".join(f"{r.tier} serves {r.served} ({r.reason})" for r in rows)
    timings["total"] = time.perf_counter() - t0
    result = RetrainResult(
        status, reason, version=path.name, active_before=active_id, data=data_info, tiers=rows, seconds=timings
    )
    write_report(result, opts.out or path)
    return result


def _refused(exc: RetrainRefused, ts, active_id: str | None, trust: list[str], reports: Path) -> RetrainResult:
    """The result of a retrain its data checks refused, its report written to ``reports``: what the window
    held and left out, and why."""
    result = RetrainResult(RetrainStatus.REFUSED, str(exc), active_before=active_id,
                           data={"left_out": ts.skipped, "rows": ts.n_rows, "rows_by_source": ts.rows_by_source(),
                                 "feedback_spend_usd": ts.spend_by_source, "trust": trust})  # fmt: skip
    write_report(result, reports)
    return result
