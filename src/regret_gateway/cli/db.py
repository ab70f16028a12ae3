"""`regret-gateway db`: migrations, the store's status, export of the training set."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Optional

import typer

from regret_gateway.cli.base import CONFIG_OPTION, URL_OPTION, _fail, _store_url, _utc, db_app


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
    """Show the store's migration revision and row counts. Exit code 1 if migrations are pending."""
    from sqlalchemy import func, inspect, select
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.orm import Session

    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.migrate import status
    from regret_gateway.store.schema import Base

    target = _store_url(config, url)
    try:
        st = status(target)
        typer.echo(f"database: {st['url']}\nrevision: {st['current'] or '(empty)'} (head {st['head']})")
        engine = make_engine(target)
        present = set(inspect(engine).get_table_names())
        with Session(engine) as session:
            for name, table in Base.metadata.tables.items():
                if name in present:
                    typer.echo(f"{name}: {session.scalar(select(func.count()).select_from(table))} rows")
        engine.dispose()
    except SQLAlchemyError as exc:
        _fail(exc)
    if not st["up_to_date"]:
        typer.secho(f"pending migrations: {', '.join(st['pending'])} -- run `regret-gateway db upgrade`", fg=typer.colors.YELLOW)
        raise typer.Exit(1)


@db_app.command("export")
def db_export(
    out: Path = typer.Argument(..., help="Output file: .parquet, .csv or .csv.gz."),
    config: Optional[Path] = CONFIG_OPTION,
    url: Optional[str] = URL_OPTION,
    team: Optional[str] = typer.Option(None, "--team", help="Only this team's requests."),
    since: Optional[datetime] = typer.Option(None, "--since", help="Only requests at or after this time (UTC)."),
    until: Optional[datetime] = typer.Option(None, "--until", help="Only requests before this time (UTC)."),
) -> None:
    """Export the training set (decisions with outcome and quality score) for offline work."""
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.orm import Session

    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.training_set import export_training_set, training_set

    target = _store_url(config, url)
    engine = make_engine(target)
    try:
        with Session(engine) as session:
            ts = training_set(session, team=team, since=_utc(since), until=_utc(until))
        path = export_training_set(ts, out)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        _fail(exc)
    finally:
        engine.dispose()
    skipped = ", ".join(f"{k}={v}" for k, v in ts.skipped.items() if v) or "none"
    typer.echo(f"wrote {ts.n_rows} rows to {path} (left out: {skipped})")
