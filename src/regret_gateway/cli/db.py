"""`regret-gateway db`: migrations, the store's status and size, pruning past the retention period, export of the
training set and of the store's Parquet day parts."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer

from regret_gateway.cli.options import CONFIG_OPTION, URL_OPTION, _duration, _fail, _store_url, _utc, db_app


@db_app.command("upgrade")
def db_upgrade(
    config: Optional[Path] = CONFIG_OPTION,
    url: Optional[str] = URL_OPTION,
    revision: str = typer.Option("head", "--revision", help="Target Alembic revision."),
) -> None:
    """Create or migrate the store's tables (Alembic) to the latest revision."""
    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.store.migrate import status, upgrade

    target = _store_url(config, url)
    try:
        upgrade(target, revision=revision)
        st = status(target)
    except SQLAlchemyError as exc:
        _fail(exc)
    typer.echo(f"{st['url']}: at revision {st['current']} (head {st['head']})")


@db_app.command("status")
def db_status(config: Optional[Path] = CONFIG_OPTION, url: Optional[str] = URL_OPTION) -> None:
    """Show the store's migration revision, and each table's rows and bytes on disk (indexes included).
    Exit code 1 if migrations are pending."""
    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.migrate import status
    from regret_gateway.store.partitions import days, partitioned
    from regret_gateway.store.retention import table_sizes

    target = _store_url(config, url)
    try:
        st = status(target)
        typer.echo(f"database: {st['url']}\nrevision: {st['current'] or '(empty)'} (head {st['head']})")
        engine = make_engine(target)
        for size in table_sizes(engine):
            on_disk = "" if size.bytes is None else f", {_mib(size.bytes)} on disk"
            typer.echo(f"{size.name}: {size.rows} rows{on_disk}")
        with engine.connect() as conn:
            held = days(conn) if partitioned(conn) else None
        if held is not None:
            span = f"{held[0]} .. {held[-1]}" if held else "none: every row in the default partitions"
            typer.echo(f"day partitions: {len(held)} ({span})")
        engine.dispose()
    except SQLAlchemyError as exc:
        _fail(exc)
    if not st["up_to_date"]:
        typer.secho(f"pending migrations: {', '.join(st['pending'])} -- run `regret-gateway db upgrade`", fg=typer.colors.YELLOW)
        raise typer.Exit(1)


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


OLDER_THAN_OPTION = typer.Option(
    None,
    "--older-than",
    help="Delete decisions older than this (e.g. 90d, 12h). Default: store.retention_days (90 days). On a partitioned "
    "PostgreSQL store, from the start of that UTC day: the days before it are dropped whole.",
)
SCORE_WINDOW_OPTION = typer.Option(
    None,
    "--score-window",
    help="Drop the embedding of a decision that no score came for within this (e.g. 7d): it can no longer train. "
    "Default: store.score_window_days (7 days; null keeps every embedding).",
)


@db_app.command("prune")
def db_prune(
    config: Optional[Path] = CONFIG_OPTION,
    url: Optional[str] = URL_OPTION,
    older_than: Optional[str] = OLDER_THAN_OPTION,
    score_window: Optional[str] = SCORE_WINDOW_OPTION,
    dry_run: bool = typer.Option(False, "--dry-run", help="Count what would be deleted; delete nothing."),
    batch_size: int = typer.Option(5_000, "--batch-size", min=1, help="Decisions deleted per transaction."),
) -> None:
    """Delete the decisions older than the retention period, with their outcomes and scores, and drop the
    embeddings of the decisions left unscored past the score window, a batch per transaction (the gateway's
    writers keep writing between batches); on a partitioned PostgreSQL store, drop whole days and make the
    coming days' partitions. A published router keeps working: its artifact holds what it needs;
    retrain learns from what its window still finds (a score that comes after its embedding was dropped is
    stored, and left out of training as embedding_dropped)."""
    from datetime import timedelta, timezone

    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.config import load_settings
    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.partitions import ensure_days
    from regret_gateway.store.retention import drop_embeddings, prune, table_sizes

    try:
        settings = load_settings(config, store_url=url)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    age_s = _duration(older_than, "--older-than")
    if age_s is None:
        if settings.store.retention_days is None:
            _fail(ValueError("store.retention_days is null (keep everything): pass --older-than to prune"))
        age_s = 86400.0 * settings.store.retention_days  # type: ignore[operator]
    window_s = _duration(score_window, "--score-window")
    if window_s is None and settings.store.score_window_days is not None:
        window_s = 86400.0 * settings.store.score_window_days
    now = datetime.now(timezone.utc)
    cutoff = now - timedelta(seconds=age_s)
    unscored_cutoff = None if window_s is None else now - timedelta(seconds=window_s)
    engine = make_engine(settings.store.url)
    try:
        before = {s.name: s for s in table_sizes(engine)}
        with typer.progressbar(length=1, label="counting") as bar:
            counted = prune(engine, cutoff, dry_run=True)
            embeddings = 0 if unscored_cutoff is None else drop_embeddings(engine, unscored_cutoff, dry_run=True)
            bar.update(1)
        which = f"embeddings of decisions unscored before {unscored_cutoff:%Y-%m-%d %H:%M} UTC" if unscored_cutoff else ""
        if dry_run:
            days = f", {counted.days} days of them whole" if counted.days else ""
            typer.echo(f"{counted.decisions} decisions before {counted.cutoff:%Y-%m-%d %H:%M} UTC ({counted.outcomes} outcomes, "
                       f"{counted.feedback} scores{days}) would be deleted (dry run)")  # fmt: skip
            if unscored_cutoff is not None:
                typer.echo(f"{embeddings} {which} would be dropped (dry run)")
            return
        if counted.decisions:
            with typer.progressbar(length=counted.decisions, label="deleting decisions") as bar:
                done = prune(engine, cutoff, batch_size=batch_size, on_batch=bar.update)
        if embeddings:
            with typer.progressbar(length=embeddings, label="dropping embeddings") as bar:
                embeddings = drop_embeddings(engine, unscored_cutoff, batch_size=batch_size, on_batch=bar.update)  # type: ignore[arg-type]
        after = {s.name: s for s in table_sizes(engine)}
        ahead = ensure_days(engine, now.date())
    except SQLAlchemyError as exc:
        _fail(exc)
    finally:
        engine.dispose()
    if counted.decisions:
        days = f"{done.days} days dropped whole and " if done.days else ""
        typer.echo(f"deleted {done.decisions} decisions before {done.cutoff:%Y-%m-%d %H:%M} UTC ({done.outcomes} outcomes, "
                   f"{done.feedback} scores): {days}{done.batches} batches")  # fmt: skip
    else:
        typer.echo(f"no decision before {counted.cutoff:%Y-%m-%d %H:%M} UTC: nothing to delete")
    if unscored_cutoff is not None:
        typer.echo(f"dropped {embeddings} {which}")
    _report_sizes(before, after, ahead)


def _report_sizes(before: dict, after: dict, ahead) -> None:
    """The tables' rows and bytes before and after a prune, and the day partitions it made
    (:class:`~regret_gateway.store.partitions.Made`)."""
    for name in ("decisions", "outcomes", "feedback"):
        b, a = before[name], after[name]
        sizes = "" if b.bytes is None or a.bytes is None else f", {_mib(b.bytes)} -> {_mib(a.bytes)} on disk"
        typer.echo(f"{name}: {b.rows} -> {a.rows} rows{sizes}")
    if ahead.made:
        typer.echo(f"made the day partitions of {', '.join(map(str, ahead.made))}")
    if ahead.blocked:
        typer.secho(f"no partition for {', '.join(map(str, ahead.blocked))}: rows of those days are in the default partition "
                    "(pruned row by row)", fg=typer.colors.YELLOW)  # fmt: skip


@db_app.command("export")
def db_export(
    out: str = typer.Argument(
        ...,
        help="A .parquet, .csv or .csv.gz file: the training set. Or a folder or object-storage URL (a name without "
        "a file type): the store's Parquet day parts, each whole UTC day not exported yet (run it daily; `retrain "
        "--parts` reads them with DuckDB).",
    ),
    config: Optional[Path] = CONFIG_OPTION,
    url: Optional[str] = URL_OPTION,
    team: Optional[str] = typer.Option(None, "--team", help="Into a file: only this team's requests."),
    since: Optional[datetime] = typer.Option(None, "--since", help="Into a file: only requests at or after this time (UTC)."),
    until: Optional[datetime] = typer.Option(
        None,
        "--until",
        help="Only requests before this time (UTC). Day parts: the days that ended by then (default: an hour ago).",
    ),
) -> None:
    """Export the training set (decisions with outcome and quality score) for offline work, or the store as
    Parquet day parts for retrain at a platform's scale (docs/operations.md)."""
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.orm import Session

    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.parts import days_to_export, export_days
    from regret_gateway.trainset.window import export_training_set, training_set

    target = _store_url(config, url)
    into_parts = "://" in out or Path(out).is_dir() or not Path(out).suffix  # a name without a file type: day parts
    if into_parts and (team is not None or since is not None):
        _fail(ValueError("day parts hold every team's requests of every day: --team and --since apply to a file export"))
    engine = make_engine(target)
    try:
        with Session(engine) as session:
            if into_parts:
                days = days_to_export(session, out, _utc(until))
                with typer.progressbar(length=len(days), label="exporting days", file=sys.stderr) as bar:
                    done = export_days(session, out, days=days, on_day=bar.update)
            else:
                ts = training_set(session, team=team, since=_utc(since), until=_utc(until))
                path = export_training_set(ts, out)
    except (SQLAlchemyError, ValueError, ImportError, OSError) as exc:
        _fail(exc)
    finally:
        engine.dispose()
    if into_parts:
        span = f" ({done.days[0]} to {done.days[-1]})" if done.days else ""
        typer.echo(f"wrote {len(done.days)} days{span} to {out}: {done.decisions} decisions, {done.scores} scores; "
                   f"{done.already} days were there already")  # fmt: skip
        return
    skipped = ", ".join(f"{k}={v}" for k, v in ts.skipped.items() if v) or "none"
    typer.echo(f"wrote {ts.n_rows} rows to {path} (left out: {skipped})")
