"""`regret-gateway retrain | feedback import | import-logs`: what the router learns from."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from regret_gateway.cli.options import (
    CONFIG_OPTION,
    STORE_UNREACHABLE,
    URL_OPTION,
    _duration,
    _fail,
    _require_store,
    _store_url,
    _utc,
    app,
    feedback_app,
)
from regret_gateway.sampling import MAX_ROWS


@feedback_app.command("import")
def feedback_import(
    file: Path = typer.Argument(..., help="CSV (header: request_id,score[,source]) or JSON lines with those keys; .gz too."),
    config: Optional[Path] = CONFIG_OPTION,
    url: Optional[str] = URL_OPTION,
    source: str = typer.Option("import", "--source", help="Source recorded where the file has none."),
    skip_unknown: bool = typer.Option(
        False, "--skip-unknown", help="Import the known request ids and count the unknown ones, instead of refusing the file."
    ),
    skip_invalid: bool = typer.Option(
        False, "--skip-invalid", help="Import the valid rows and report the invalid ones, instead of refusing the file."
    ),
) -> None:
    """Import quality scores in bulk (an LLM judge's output, a labelling export), streamed in chunks.

    All or nothing by default: an invalid row or an unknown request id refuses the whole file and changes
    nothing. Every invalid row is reported with its line number. Exit code: 0 imported, 2 refused."""
    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.feedback_import import count_lines, import_feedback
    from regret_gateway.store.records import StoreInputError

    def invalid(line: int, why: str) -> None:
        typer.secho(f"{file} line {line}: {why}", fg=typer.colors.RED, err=True)

    target = _store_url(config, url)
    engine = make_engine(target)
    try:
        with typer.progressbar(length=count_lines(file), label="importing", file=sys.stderr) as bar:
            result = import_feedback(engine, file, default_source=source, skip_unknown=skip_unknown,
                                     skip_invalid=skip_invalid, on_invalid=invalid, on_chunk=bar.update)  # fmt: skip
    except (StoreInputError, ValueError, FileNotFoundError, SQLAlchemyError) as exc:
        _fail(exc)
    finally:
        engine.dispose()
    unknown = f"{result.unknown} unknown request ids (e.g. {', '.join(map(repr, result.unknown_examples))})"
    if not result.committed:
        reasons = [f"{result.invalid} invalid rows (above; --skip-invalid imports the rest)"] if result.invalid else []
        reasons += [f"{unknown} (--skip-unknown imports the rest)"] if result.unknown else []
        _fail(ValueError(f"{file}: nothing imported: {'; '.join(reasons)}"))
    skipped = ([f"skipped {result.invalid} invalid rows"] if result.invalid else []) + (
        [f"skipped {unknown}"] if result.unknown else []
    )
    typer.echo(f"imported {result.imported} scores from {file}" + (f"; {'; '.join(skipped)}" if skipped else ""))


_RETRAIN_SINCE = typer.Option(None, "--since", help="Only requests at or after this time (UTC).")
_RETRAIN_WINDOW = typer.Option(None, "--window", help="Only the last DURATION of requests, e.g. 7d (instead of --since).")
_RETRAIN_TEAM = typer.Option(None, "--team", help="Only this team's requests.")
_RETRAIN_FEEDBACK = typer.Option(
    None,
    "--feedback",
    help="Quality sources to learn from, in order of preference, e.g. 'user,judge' (a request scored by both "
    "takes the first). Default: every source, user first, the LLM judge last.",
)
_RETRAIN_MARGIN = typer.Option(
    0.0,
    "--margin",
    min=0.0,
    help="A candidate replaces what a tier serves only if its estimated gain is above this with 95% confidence "
    "(utility units; 0.01 = 1 point x100).",
)
_RETRAIN_FORCE = typer.Option(False, "--force", help="Serve each tier's best candidate even when its gain is not confident.")
_RETRAIN_FOLDS = typer.Option(
    None,
    "--folds",
    min=2,
    help="The rows split into this many folds, each held out for evaluation in turn [default: 5, or 2 past "
    "60,000 rows: two fits on half the rows cost what one fit on all of them does].",
)
_RETRAIN_CROSS_FIT = typer.Option(
    True,
    "--cross-fit/--no-cross-fit",
    help="Hold out every fold in turn (--folds fits): every logged row is evaluated by a fit that did not see it. "
    "--no-cross-fit holds out the first fold only: one fit, --folds times faster, but the gate sees a fold's "
    "rows and its intervals are about sqrt(--folds) times as wide.",
)
_RETRAIN_REGIONS = typer.Option(
    True,
    "--regions/--no-regions",
    help="Each tier's safe default departs from its constant model in the regions of prompt space whose logs "
    "prove another model better there (default); --no-regions: the constant alone, learned routers all or nothing.",
)
_RETRAIN_JUDGE_CALIBRATION = typer.Option(
    True,
    "--judge-calibration/--no-judge-calibration",
    help="Correct the LLM judge's scores by its error measured where users scored the same requests (per "
    "model judged; the report and `status` show it); --no-judge-calibration takes its scores as they are.",
)
_RETRAIN_PARTS = typer.Option(
    None,
    "--parts",
    help="Read the window from the store's Parquet day parts at this folder or URL (`db export FOLDER`, run "
    "daily) with DuckDB instead of from the store: the same rows and rules over the days exported, at a "
    "platform's scale (needs the scale extra; docs/operations.md).",
)
_RETRAIN_MAX_ROWS = typer.Option(
    MAX_ROWS,
    "--max-rows",
    min=0,
    help="A window with more usable rows is sampled down to this many: every (tier, model) keeps the same share, "
    "so the logged propensities stay exact (0: keep every row; memory and time grow with the window).",
)
_RETRAIN_COLD_START_ROWS = typer.Option(
    0,
    "--cold-start-rows",
    min=0,
    help="Before the first router is published (none active): refuse until every model has this many logged "
    "rows with a quality score (a user's or the judge's). The constant each tier starts from is chosen on the "
    "cold start's rows and kept until another is proven better, so more rows choose it better "
    "(docs/operations.md) [default: 0, the usual 20 a model].",
)
_RETRAIN_EVERY = typer.Option(None, "--every", help="Repeat forever every DURATION (e.g. 6h); without it, run once.")
_RETRAIN_OUT = typer.Option(None, "--out", help="Report folder (default: the new version's folder).")
_RETRAIN_THREADS = typer.Option(
    None,
    "--threads",
    min=1,
    help="CPU threads of the network fits (default: torch's, one per core). Where other CPU work runs beside "
    "the retrain (the proxy, another job), use fewer: torch's threads spin while they wait, and two jobs that "
    "each use every core are several times slower than each on its share (docs/operations.md).",
)
_RETRAIN_PRECISION = typer.Option(
    "auto",
    "--precision",
    help="Matrix products of the fits past 5,000 rows: auto (bfloat16 where the CPU multiplies it natively, "
    "AVX512-BF16 or AMX; float32 elsewhere) | float32 | bfloat16. Parameters, losses and predictions stay "
    "float32 either way; float32 is slower where bfloat16 is native (docs/operations.md).",
)
_RETRAIN_SEED = typer.Option(
    0,
    "--seed",
    help="Seed of the folds, the fits and the bootstrap: the same logs and seed publish the same router.",
)
_RETRAIN_EXECUTOR = typer.Option(
    "local",
    "--executor",
    help="Where the cross-fitting folds are fitted: local (here, one after another) | ray (each fold a Ray task: "
    "a local Ray started for the run, or the cluster RAY_ADDRESS names; needs the ray extra). The same seed "
    "publishes the same router on either.",
)


@app.command("retrain")
def retrain_cmd(
    config: Optional[Path] = CONFIG_OPTION,
    url: Optional[str] = URL_OPTION,
    since: Optional[datetime] = _RETRAIN_SINCE,
    window: Optional[str] = _RETRAIN_WINDOW,
    team: Optional[str] = _RETRAIN_TEAM,
    feedback: Optional[str] = _RETRAIN_FEEDBACK,
    margin: float = _RETRAIN_MARGIN,
    force: bool = _RETRAIN_FORCE,
    folds: Optional[int] = _RETRAIN_FOLDS,
    cross_fit: bool = _RETRAIN_CROSS_FIT,
    regions: bool = _RETRAIN_REGIONS,
    judge_calibration: bool = _RETRAIN_JUDGE_CALIBRATION,
    parts: Optional[str] = _RETRAIN_PARTS,
    max_rows: int = _RETRAIN_MAX_ROWS,
    cold_start_rows: int = _RETRAIN_COLD_START_ROWS,
    every: Optional[str] = _RETRAIN_EVERY,
    out: Optional[Path] = _RETRAIN_OUT,
    threads: Optional[int] = _RETRAIN_THREADS,
    precision: str = _RETRAIN_PRECISION,
    seed: int = _RETRAIN_SEED,
    executor: str = _RETRAIN_EXECUTOR,
) -> None:
    """Retrain from the gateway's logs; each tier serves the best candidate that is confidently better than what it has.

    Reads decisions with outcomes and quality scores, checks that they can support a router, fits the
    propensity/outcome/doubly robust stage, RM-Interval, RM-Cluster and R&C on all but each fold in turn
    (all but the first only with --no-cross-fit). Per tier the candidates (those routers, the safe default --
    the best constant model, except in regions of prompt space the logs prove -- and what the tier serves
    now) are evaluated on the held-out rows (DR, SNIPS, bootstrap CIs); a candidate replaces the incumbent
    only with a confident gain, so no tier serves something estimated worse than the fixed choice. Exit code: 0 published, 1 kept, 2 refused, 3 store unreachable (with
    --every it keeps going and tries again next period).
    """
    from datetime import timedelta

    from regret_gateway.config import load_settings
    from regret_gateway.retrain import RetrainOptions, retrain_every
    from regret_gateway.store.engine import make_engine

    try:
        settings = load_settings(config, store_url=url)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    period = _duration(every, "--every")
    span = _duration(window, "--window")
    sources = tuple(x.strip() for x in feedback.split(",") if x.strip()) if feedback is not None else None
    if sources is not None and (not sources or len(set(sources)) != len(sources)):
        _fail(ValueError(f"--feedback must name distinct sources, e.g. 'user,judge', got {feedback!r}"))
    for flag, value in (("precision", precision), ("executor", executor)):
        try:
            RetrainOptions(**{flag: value})
        except ValueError as exc:
            _fail(ValueError(f"--{flag}: {exc}"))
    _require_store(settings.store.url, config, "retrain")
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    engine = make_engine(settings.store.url)

    def options() -> RetrainOptions:
        start = _utc(since) if span is None else datetime.now(timezone.utc) - timedelta(seconds=span)
        return RetrainOptions(since=start, team=team, feedback=sources, margin=margin, force=force, folds=folds,
                              regions=regions, cross_fit=cross_fit, out=out, parts=parts, max_rows=max_rows or None,
                              calibrate_judge=judge_calibration, precision=precision,
                              cold_start_rows=cold_start_rows, seed=seed, executor=executor)  # fmt: skip

    def progress(line: str) -> None:  # each step as it starts and ends, on stderr: a long retrain is not silent
        typer.echo(f"{datetime.now():%Y-%m-%d %H:%M:%S} {line}", err=True)

    try:
        result = retrain_every(settings, engine, options, period, on_result=_show_retrain,
                               on_unreachable=lambda exc: _say_unreachable(engine, exc), progress=progress)  # fmt: skip
    finally:
        engine.dispose()
    raise typer.Exit(STORE_UNREACHABLE if result is None else result.status.exit_code)


def _say_unreachable(engine, exc: Exception) -> None:
    """The store could not be reached: one line, not a traceback."""
    typer.secho(f"{datetime.now():%Y-%m-%d %H:%M:%S} store unreachable ({engine.url.render_as_string(hide_password=True)}): "
                f"{type(exc).__name__}: {str(exc).splitlines()[0]}", fg=typer.colors.RED, err=True)  # fmt: skip


def _show_retrain(result) -> None:
    """One retrain's outcome, its table and what its rows were, on stdout."""
    from regret_gateway.retrain import RetrainStatus, report_table

    color = {RetrainStatus.PUBLISHED: typer.colors.GREEN, RetrainStatus.KEPT: typer.colors.YELLOW,
             RetrainStatus.REFUSED: typer.colors.RED}[result.status]  # fmt: skip
    typer.secho(f"{datetime.now():%Y-%m-%d %H:%M:%S} {result.status}: {result.reason}", fg=color)
    if result.tiers:
        typer.echo(report_table(result))
    for line in result.data.get("trust") or ():
        typer.secho(line, fg=typer.colors.RED if "flagged" in line else None)
    if result.data.get("rows"):
        by_source = ", ".join(f"{k} {v}" for k, v in (result.data.get("rows_by_source") or {}).items())
        typer.echo(f"rows: {result.data['rows']} (scored by: {by_source or '-'}; left out: {result.data.get('left_out')})")
        for src, usd in sorted((result.data.get("feedback_spend_usd") or {}).items()):
            typer.echo(f"scores from {src} in the window cost ${usd:.4f}")
        if result.data.get("sampled_from"):
            typer.echo(f"sampled: {result.data['rows']} of {result.data['sampled_from']} usable rows (--max-rows)")
        if judge := result.data.get("judge"):
            how = (f"corrected by its measured error ({', '.join(f'{k}: {v} rows' for k, v in judge['corrected_rows'].items())})"
                   if judge["calibrated"] else judge["why"])  # fmt: skip
            typer.echo(f"judge's scores ({judge['rows']} rows): {how}")
    typer.echo(f"report: {', '.join(result.report_paths.values())}")


@app.command("import-logs")
def import_logs_cmd(
    file: Path = typer.Argument(
        ..., help="Historical logs: CSV, CSV.gz, Parquet or JSON lines (columns: model, quality, cost_usd, prompt or x0..)."
    ),
    config: Optional[Path] = CONFIG_OPTION,
    url: Optional[str] = URL_OPTION,
) -> None:
    """Load historical request logs (without propensities) so retrain can start from them. Prompts are
    embedded with the configured embedder; propensities are then estimated with XGBoost at retrain."""
    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.config import load_settings
    from regret_gateway.encoders.embedder import Embedder
    from regret_gateway.importer import import_logs
    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.migrate import upgrade
    from regret_gateway.store.records import StoreInputError

    try:
        settings = load_settings(config, store_url=url)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    emb = Embedder.from_settings(settings, progress=True)  # the importer renders the context template from each row
    upgrade(settings.store.url)
    engine = make_engine(settings.store.url)
    try:
        n = import_logs(file, settings, engine, encode=emb.encode)
    except (StoreInputError, FileNotFoundError, SQLAlchemyError, ImportError) as exc:
        _fail(exc)
    finally:
        engine.dispose()
    typer.echo(f"imported {n} new requests from {file} into {settings.store.url}")
