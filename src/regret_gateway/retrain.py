"""``regret-gateway retrain``: from the gateway's logs to a new, checked router, published without a restart.

1. Read decisions with outcome and quality score from the store (``training_set``: rows without a score,
   failed requests and fail-open fallbacks are left out and counted).
2. Check the data: enough rows, enough per model, randomised logging (propensities < 1), overlap
   (minimum propensity, effective sample size per model). Refuse with a clear message otherwise.
3. Split the rows into ``folds`` (5) folds and hold out each in turn (cross-fitting, the default); on the
   other folds fit the nuisance stage (the logged propensities -- exact, the gateway sampled them;
   XGBoost estimates when some rows were imported without one -- and the outcome MLPs), doubly robust
   scores,
4. and the learned routers: RM-Interval (one RM-Softmax policy per configured tier lambda, interval nets
   between them), RM-Cluster (per embedding cluster, the model with the best mean DR score) and R&C (the
   outcome models' argmax). So every row is evaluated, each candidate's choice and the outcome models'
   predictions on it coming from the fit that did not see it; what is published is the first fold's
   fit. ``cross_fit=False`` holds out the first fold only: one fit instead of ``folds``, and the gate
   sees a fifth of the rows (intervals about sqrt(5) times as wide).
5. Per tier, the candidates: those learned routers, the safe default -- the best constant model (the
   fixed choice, by the mean DR score of every row: out of fold where cross-fitted), except in the
   regions of prompt space whose out-of-fold DR scores prove another model better
   (:mod:`regret_gateway.policy.regions`; ``regions=False``: the constant alone) -- and what the tier
   serves now (the active router's policy for it, when it is a learned router). Off-policy evaluation of each on the held-out rows: DR and SNIPS value,
   bootstrap intervals, ESS (cross-fitted: the value of the procedure that trains on 4/5 of the logs,
   on five times the rows). The best
   candidate replaces the incumbent only if the paired bootstrap interval of its gain lies above
   ``margin`` (``force``: whenever it is better). The held-out rows were logged by several policies (each
   tier under each router version); each one's DR correction counts as far as it saw the candidate's
   choices (:mod:`regret_gateway.ope`), so a tier's comparison is not swamped by rows another tier
   explored at tiny propensities. Unless the tier serves a learned router, the incumbent is its
   safe default, re-derived over the constant the tier serves (that constant is sticky). So no tier serves something estimated worse than the fixed choice or than what it
   had, and a tier that does not improve keeps its policy while the others update.
6. Write the versioned artifact -- a per-tier policy with this retrain's utility estimates, which
   exploration reads -- point ``ACTIVE`` at it and mark it active in the store: the gateway swaps it in
   on its next reload check. "published" when a tier changed -- it sends some logged request elsewhere
   -- (or none was served before); "kept" when every tier serves what it served, with only the
   estimates renewed.
7. Report: a table per tier and candidate, which one each tier serves and why; JSON and PNG.

Steps 3-5 (the fits and the per-tier choice) are :mod:`regret_gateway.policy.candidates`, which holds
no store or artifacts-folder code (the offline bench's ``served`` row runs them on simulated logs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from regret_gateway.artifacts import (
    ArtifactError,
    RouterArtifact,
    activate,
    active_version_id,
    load_artifact,
    save_artifact,
    version_folder,
)
from regret_gateway.causal.stats import effective_sample_size
from regret_gateway.config import Settings
from regret_gateway.data import LoggedFeedback
from regret_gateway.nn.training import PRECISIONS, step_dtype
from regret_gateway.policy.candidates import (
    FULL_BATCH_ROWS,
    N_BOOT,
    TierEvaluation,
    default_folds,
    evaluate,
    held_out_rows,
    out_of_fold_fits,
)
from regret_gateway.policy.frontier import budget_ladders
from regret_gateway.servable import ServablePolicy
from regret_gateway.store.records import team_key
from regret_gateway.store.training_set import MAX_ROWS


class RetrainRefused(ValueError):
    """The logs cannot support a router (the message says why); nothing was published."""


@dataclass(frozen=True)
class RetrainOptions:
    since: datetime | None = None
    until: datetime | None = None
    team: str | None = None
    feedback: tuple[str, ...] | None = None  # quality sources to learn from, in order (None: all, user first, judge last)
    margin: float = 0.0  # a candidate must beat the incumbent by more than this (lower end of the paired 95% CI)
    force: bool = False
    regions: bool = True  # the safe default departs from the constant where the logs prove it (policy/regions.py)
    folds: int | None = None  # the rows split into this many folds (None: 5, or 2 past 60,000 rows: default_folds)
    cross_fit: bool = True  # every fold held out once (``folds`` fits, every row evaluated); False: the first (one fit)
    calibrate_judge: bool = True  # the judge's scores corrected by its error against user scores (store.judge_errors)
    max_rows: int | None = MAX_ROWS  # a larger window is sampled down to this many rows (store.training_set.sample_rows)
    precision: str = "auto"  # the mini-batch fits' products (past 5,000 rows): auto | float32 | bfloat16 (nn.training)
    min_rows: int = 200
    min_rows_per_model: int = 20
    cold_start_rows: int = 0  # before the first router (none active): every model needs this many scored rows (check_data)
    min_ess_per_model: float = 10.0
    n_boot: int = N_BOOT
    seed: int = 0
    out: Path | None = None  # report folder (default: the new version's folder, or artifacts/reports)

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.cold_start_rows < 0:
            raise ValueError(f"cold_start_rows must be >= 0, got {self.cold_start_rows}")


@dataclass
class RetrainResult:
    status: str  # published | kept | refused
    reason: str
    version: str | None = None
    active_before: str | None = None
    data: dict = field(default_factory=dict)
    tiers: list[TierEvaluation] = field(default_factory=list)
    seconds: dict = field(default_factory=dict)
    report_paths: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def check_data(logged: LoggedFeedback | None, skipped: dict, opts: RetrainOptions, *, first: bool = False) -> dict:
    """Diagnostics of the training logs; raises :class:`RetrainRefused` when they cannot support a router.
    ``first``: no router is active yet, so every model also needs ``opts.cold_start_rows`` scored rows: the
    constant each tier starts from is chosen on the cold start's rows and stays until another is proven better
    (:func:`regret_gateway.policy.candidates.evaluate`), so a longer cold start chooses it better
    (docs/experiments/closed-loop.md). A judge's score counts as one row like a user's: counted at its worth in
    true scores, a noisy judge's cold start lasted 1 / (1 - false pass - false fail)^2 times as long, and the
    teams paid for the uniform rounds more than the better first choice gave back (docs/experiments/judge.md)."""
    left_out = ", ".join(f"{k}={v}" for k, v in skipped.items() if v) or "none"
    if logged is None or logged.n_samples == 0:
        raise RetrainRefused(
            f"no usable rows (left out: {left_out}); rows need an outcome and a quality score "
            "(POST /regret/feedback or `regret-gateway feedback import`)"
        )
    if logged.n_samples < opts.min_rows:
        raise RetrainRefused(f"only {logged.n_samples} usable rows, at least {opts.min_rows} needed (left out: {left_out})")
    counts = logged.counts()
    need = opts.min_rows_per_model
    few = [f"{m} ({int(c)})" for m, c in zip(logged.model_names, counts) if c < need]
    if few:
        raise RetrainRefused(f"too few logged rows for {', '.join(few)}; every model needs {need}. "
                             "Raise exploration (tier epsilon) or remove the model from `models`.")  # fmt: skip
    if first and opts.cold_start_rows > need:
        need = opts.cold_start_rows
        few = [f"{m} ({int(c)})" for m, c in zip(logged.model_names, counts) if c < need]
        if few:
            raise RetrainRefused(
                f"too few logged rows for {', '.join(few)}; before the first router every model needs {need} "
                "(cold_start_rows): the constant each tier starts from is chosen on them and kept until another is "
                "proven better. Let the cold start log more and retrain later."
            )
    info = {
        "rows": int(logged.n_samples),
        "rows_per_model": {m: int(c) for m, c in zip(logged.model_names, counts)},
        "left_out": dict(skipped),
    }
    imported = logged.imported
    if imported.all():  # every row imported: propensities are estimated (XGBoost), overlap unknown here
        return {**info, "propensity": "estimated (XGBoost): the rows were imported without a logged propensity"}
    if imported.any():  # the logged rows' overlap is checked below; the imported rows' is estimated
        info["propensity_imported_rows"] = int(imported.sum())
        logged = logged.subset(np.flatnonzero(~imported))
    p = logged.propensity
    assert p is not None
    if np.all(p >= 1.0 - 1e-12):
        raise RetrainRefused(
            "every logged propensity is 1: the logging was not randomised, so the outcome of any "
            "other model cannot be estimated without bias. Set epsilon > 0 on the tiers (a tier at epsilon 0 "
            "serves one model, its fallback under `cold_start: fallback`) and log more."
        )
    ess = {m: effective_sample_size(1.0 / p[logged.action == t]) for t, m in enumerate(logged.model_names)}
    low = [f"{m} ({v:.1f})" for m, v in ess.items() if v < opts.min_ess_per_model]
    if low:
        raise RetrainRefused(
            f"effective sample size too small for {', '.join(low)} (need {opts.min_ess_per_model}): "
            "a few rows with tiny propensities dominate"
        )
    how = "logged" if not imported.any() else f"logged; estimated (XGBoost) for the {int(imported.sum())} imported rows"
    return {**info, "propensity": how, "min_propensity": float(p.min()), "ess_per_model": ess}


def judge_calibration(ts) -> dict | None:
    """What the report says of the judge's scores among the rows (None: no row learns from one): its error
    measured against the users' scores and against itself per model, and how many rows each estimate
    corrected (keys: the users' estimate of a model or "*", "self-agreement <model>")."""
    from regret_gateway.store.queries import JUDGE_SOURCE

    judged = ts.rows_by_source().get(JUDGE_SOURCE, 0)
    if not judged:
        return None
    errors = {m: e.describe() for m, e in ts.judge_errors.items()}
    agreement = {m: a.describe() for m, a in ts.judge_self_agreement.items()}
    if not ts.judge_corrected:
        measured = [*ts.judge_errors.values(), *ts.judge_self_agreement.values()]
        why = (
            "no request scored by both a user and the judge, and none judged twice"
            if not measured
            else "--no-judge-calibration"
            if any(e.usable for e in measured)
            else "too few user-scored or twice-judged requests to estimate its error"
        )
        return {"rows": judged, "calibrated": False, "why": f"uncalibrated ({why}): its scores are used as they are",
                "errors": errors, "self_agreement": agreement}  # fmt: skip
    return {"rows": judged, "calibrated": True, "corrected_rows": ts.judge_corrected, "errors": errors,
            "self_agreement": agreement}  # fmt: skip


def _read(settings: Settings, engine: Engine, opts: RetrainOptions):
    from regret_gateway.store.training_set import training_set

    with Session(engine) as session:
        return training_set(
            session,
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


def _active(settings: Settings, active_id: str | None, data_info: dict) -> RouterArtifact | None:
    if active_id is None:
        return None
    try:
        return load_artifact(
            version_folder(settings.artifacts_dir, active_id),
            models=settings.models,
            embedder_model=settings.embedder.embedding_id,
        )
    except ArtifactError as exc:
        data_info["active_unreadable"] = str(exc)
        return None


PUBLISH_LOCK = ".publish-lock"  # in the artifact folder


def publish(settings: Settings, engine: Engine, policy: ServablePolicy, rows: list[TierEvaluation], data_info: dict) -> Path:
    """Write the versioned artifact, point ``ACTIVE`` at it and add it to the store's version history."""
    from regret_gateway.store.locks import advisory_lock, file_lock
    from regret_gateway.store.writes import record_version

    root = Path(settings.artifacts_dir)
    tiers = [{**asdict(r), "changed": r.changed} for r in rows]
    metrics = json.loads(json.dumps({"tiers": tiers, "data": data_info}, default=float))  # plain JSON types
    e = settings.embedder
    embedder = {"model": e.model, "template": e.template, "id": e.embedding_id}
    path = save_artifact(root, policy=policy, tiers={n: s.lam for n, s in settings.tiers_by_lambda()}, embedder=embedder,
                         metrics=metrics)  # fmt: skip
    # One publisher at a time, across processes and machines: the version ACTIVE names is the newest row.
    with file_lock(root / PUBLISH_LOCK), advisory_lock(engine, "publish"):
        activate(root, path.name)
        with Session(engine) as session, session.begin():
            record_version(session, path.name, str(path.resolve()), metrics)
    return path


def retrain(
    settings: Settings, engine: Engine, opts: RetrainOptions = RetrainOptions(), *, progress: Callable[[str], None] | None = None
) -> RetrainResult:
    """Run the whole pipeline once: read, check, fit, evaluate, gate, publish, report. Never raises for bad
    data: a refusal is a result with status 'refused'. ``progress`` is told each step as it starts and ends
    (one line each: the CLI prints them, so a long retrain is not silent)."""
    say = progress or (lambda line: None)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    root = Path(settings.artifacts_dir)
    active_id = active_version_id(root)
    say("reading the logs")
    ts = _read(settings, engine, opts)
    timings["read"] = time.perf_counter() - t0
    say(f"read {ts.n_rows:,} usable rows in {timings['read']:.1f} s")
    trust = [check.line() for check in ts.team_checks.values()]  # whose user scores train (regret_gateway.trust)
    try:
        if len(settings.models) < 2:
            raise RetrainRefused("`models` must list at least 2 models")
        data_info = {**check_data(ts.logged, ts.skipped, opts, first=active_id is None), "rows_by_source": ts.rows_by_source(),
                     "feedback_spend_usd": ts.spend_by_source, "sampled_from": ts.sampled_from,
                     "judge": judge_calibration(ts), "trust": trust}  # fmt: skip
    except RetrainRefused as exc:
        result = RetrainResult("refused", str(exc), active_before=active_id,
                               data={"left_out": ts.skipped, "rows": ts.n_rows, "rows_by_source": ts.rows_by_source(),
                                     "feedback_spend_usd": ts.spend_by_source, "trust": trust})  # fmt: skip
        _write_report(result, opts.out or root / "reports")
        return result
    logged = ts.logged
    tiers = settings.tiers_by_lambda()
    t1 = time.perf_counter()
    k = default_folds(logged.n_samples) if opts.folds is None else opts.folds

    def fitting(fold: int, of: int, rows: int) -> None:
        say(f"fit {fold} of {of} on {rows:,} rows ({time.perf_counter() - t1:.1f} s so far)")

    fits = out_of_fold_fits(logged, [spec.lam for _, spec in tiers], folds=k, every=opts.cross_fit, seed=opts.seed,
                            on_fit=fitting, precision=opts.precision)  # fmt: skip
    held = held_out_rows(fits, np.array(ts.loggers))
    data_info["evaluation"] = (
        f"cross-fitted, {k} folds: every row held out once" if opts.cross_fit else f"1/{k} of the rows held out"
    )
    dtype = str(step_dtype(opts.precision)).removeprefix("torch.")
    data_info["precision"] = f"{opts.precision}: fits past {FULL_BATCH_ROWS:,} rows multiply in {dtype}, smaller ones in float32"
    timings["fit"] = time.perf_counter() - t1
    say(f"fitted in {timings['fit']:.1f} s; evaluating every tier's candidates on {held.logs.n_samples:,} held-out rows")
    t2 = time.perf_counter()
    active = _active(settings, active_id, data_info)
    rows, policy = evaluate(
        fits, tiers, active, np.array(ts.loggers), margin=opts.margin, force=opts.force,
        n_boot=opts.n_boot, seed=opts.seed, regions=opts.regions, held=held, size=settings.embedder.size,
    )  # fmt: skip
    timings["evaluate"] = time.perf_counter() - t2
    say(f"evaluated in {timings['evaluate']:.1f} s; publishing")
    teams = np.array(ts.teams, dtype=object)[fits.order]
    budgeted = {t: np.flatnonzero(teams == team_key(t)) for t, spec in settings.teams.items() if spec.budget is not None}
    data_info["budget_ladder"] = budget_ladders(
        settings, policy, held.logs.X, held.data, budgeted, ts.created_at[fits.order], n_boot=opts.n_boot, seed=opts.seed
    )
    # published even when every tier keeps what it serves: the new version carries this retrain's utility
    # estimates, which exploration reads; with the old ones it would keep exploring where the first
    # retrain's estimates pointed, and the comparisons the gate has to make next would get no new rows
    path = publish(settings, engine, policy, rows, data_info)
    if active is not None and not any(r.changed for r in rows):
        status = "kept"
        reason = (
            f"no candidate is confidently better than what each tier serves -- the active router stays (republished as "
            f"{path.name} with this retrain's utility estimates for exploration): "
            + "; ".join(f"{r.tier}: {r.reason}" for r in rows)
        )
    else:
        status, reason = "published", "; ".join(f"{r.tier} serves {r.served} ({r.reason})" for r in rows)
    timings["total"] = time.perf_counter() - t0
    result = RetrainResult(
        status, reason, version=path.name, active_before=active_id, data=data_info, tiers=rows, seconds=timings
    )
    _write_report(result, opts.out or path)
    return result


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
            result = retrain(settings, engine, options(), progress=progress)
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


def report_table(result: RetrainResult) -> str:
    """Markdown table per tier and candidate: estimated utility x100 (DR, 95% CI), SNIPS, quality, cost per
    1k requests, ESS; which candidate each tier serves, and why."""
    lines = [
        "| tier | λ | candidate | utility x100 (DR, 95% CI) | SNIPS x100 | quality | $ per 1k req | ESS | serves |",
        "|---|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for row in result.tiers:
        for label, v in row.values.items():
            mark = "**served**" if label == row.served else ("incumbent" if label == row.incumbent else "")
            lines.append(
                f"| {row.tier} | {row.lam:g} | {label} | {100 * v.dr:.2f} [{100 * v.dr_ci[0]:.2f}, {100 * v.dr_ci[1]:.2f}] | "
                f"{100 * v.snips:.2f} | {v.quality:.3f} | {1000 * v.cost:.3f} | {v.ess:.0f} | {mark} |"
            )
    lines.append("")
    lines += [f"- {row.tier}: serves {row.served} -- {row.reason}" for row in result.tiers]
    return "\n".join(lines)


def _write_report(result: RetrainResult, folder: Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = "report" if result.version and folder.name == result.version else f"retrain-{datetime.now():%Y%m%d-%H%M%S}"
    json_path = folder / f"{stem}.json"
    json_path.write_text(json.dumps(result.to_dict(), indent=2, default=float))
    result.report_paths = {"json": str(json_path)}
    try:
        import matplotlib  # noqa: F401  (the `train` extra)
    except ImportError:
        return  # a gateway-only install: the JSON report, no plot
    if result.tiers:
        png = folder / f"{stem}.png"
        _plot(result, png)
        result.report_paths["png"] = str(png)
        json_path.write_text(json.dumps(result.to_dict(), indent=2, default=float))


def _plot(result: RetrainResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tiers = result.tiers
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    x = np.arange(len(tiers))

    def group(label: str) -> str:
        return "incumbent" if label.endswith(")") else label.split(":")[0]

    groups = list(dict.fromkeys(group(label) for t in tiers for label in t.values))
    width = 0.8 / len(groups)
    for k, g in enumerate(groups):
        for j, t in enumerate(tiers):
            label = next((lab for lab in t.values if group(lab) == g), None)
            if label is None:
                continue
            v = t.values[label]
            ax1.bar(x[j] + (k - (len(groups) - 1) / 2) * width, 100 * v.dr, width, color=f"C{k}",
                    yerr=[[100 * (v.dr - v.dr_ci[0])], [100 * (v.dr_ci[1] - v.dr)]], capsize=3,
                    edgecolor="black" if label == t.served else "none", linewidth=2,
                    label=g if j == 0 or not any(group(lab) == g for tt in tiers[:j] for lab in tt.values) else None)  # fmt: skip
    ax1.set_xticks(x, [f"{t.tier}\nλ={t.lam:g}" for t in tiers])
    ax1.set_ylabel("estimated utility x100 (DR, 95% CI)")
    ax1.set_title(f"retrain: {result.status} (black edge: served)")
    ax1.legend(fontsize=8)
    models = list(tiers[0].model_mix)
    bottom = np.zeros(len(tiers))
    for m in models:
        share = np.array([t.model_mix[m] for t in tiers])
        ax2.bar(x, share, 0.6, bottom=bottom, label=m)
        bottom += share
    ax2.set_xticks(x, [t.tier for t in tiers])
    ax2.set_ylabel("share of held-out requests")
    ax2.set_title("model mix of what each tier serves")
    ax2.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
