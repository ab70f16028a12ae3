"""`regret-gateway serve | status | report | export-encoder`: run the gateway, see what it does and what it saved,
publish its encoder."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

import typer

from regret_gateway.cli.options import CONFIG_OPTION, URL_OPTION, _duration, _fail, _require_extra, _require_store, app


@app.command("serve")
def serve(
    config: Path = typer.Option(
        ..., "--config", "-c", help="The LiteLLM proxy config.yaml (model_list, callbacks, and the `regret_gateway:` section)."
    ),
    host: str = typer.Option("0.0.0.0", "--host", help="Interface to listen on."),
    port: int = typer.Option(4000, "--port", help="Port to listen on."),
    mock_upstream: bool = typer.Option(
        False,
        "--mock-upstream",
        help="Try the gateway without provider keys: every model of model_list is answered by a local mock "
        "(it names the model and echoes the prompt), priced as LiteLLM prices the real model.",
    ),
) -> None:
    """Run the LiteLLM proxy with the regret-gateway hook and the /regret/feedback and /regret/decisions routes.

    A config that cannot work is refused before the proxy starts, with one line naming the key: a routed model
    or the judge's model missing from model_list, a store URL that is not SQLite or PostgreSQL (or whose
    driver is not installed), an SQLite file in a folder that does not exist, an environment variable the
    config reads (the master key, a team key) that is not set, a routed model without a price, a port in use.
    With LiteLLM's database (`general_settings.database_url` or DATABASE_URL), the proxy is LiteLLM's own CLI,
    `litellm --config`, which runs LiteLLM's database migrations before it serves; the hook starts inside it.
    Shut down with SIGTERM or Ctrl-C: the
    decisions still queued are written first."""
    import contextlib
    import tempfile

    from regret_gateway.gateway.preflight import check_deployment, check_port

    try:
        check_port(host, port)  # before anything loads: the proxy's import and the encoder take a while
        check_deployment(config)  # fail here, with a clear message, rather than on the first request
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    from regret_gateway.gateway.app import litellm_database, litellm_environment, run_litellm_cli
    from regret_gateway.gateway.server import serve as run

    with contextlib.ExitStack() as stack:
        if mock_upstream:
            import yaml

            from regret_gateway.bench.local import LocalServer, echo_response, free_port, mock_deployment
            from regret_gateway.bench.local import mock_upstream as mock_app
            from regret_gateway.config import read_yaml

            litellm_environment()
            up = free_port()
            stack.enter_context(LocalServer(mock_app(echo_response), up))
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="regret-gateway-mock-")))
            mocked = folder / "config.yaml"
            mocked.write_text(yaml.safe_dump(mock_deployment(read_yaml(config), f"http://127.0.0.1:{up}/v1")))
            typer.secho(f"--mock-upstream: every model of {config} is answered by a MOCK at 127.0.0.1:{up}, not the real "
                        f"model. Its decisions are marked `mock` in the store: retrain does not learn from them and no "
                        f"team budget is charged for them.", err=True, fg=typer.colors.YELLOW, bold=True)  # fmt: skip
            config = mocked
        if litellm_database(config):  # LiteLLM's CLI sets its database up (migrations and all) before it serves
            raise typer.Exit(run_litellm_cli(config, host=host, port=port))
        run(config, host=host, port=port)


@app.command("status")
def status_cmd(config: Optional[Path] = CONFIG_OPTION, url: Optional[str] = URL_OPTION) -> None:
    """The active router version and its age, rows logged since, feedback coverage by source (user, LLM judge,
    imports), the judge's spend and its agreement with user scores, fallback and exploration counts; per team
    with a budget, its spend in the budget's period so far and where it is headed; per team, what routing
    saved over the last 30 days against the dearest model (`report` says more)."""
    from regret_gateway.artifacts import ArtifactError, active_version_id, load_artifact, version_folder
    from regret_gateway.budgets.status import budget_status
    from regret_gateway.config import load_settings
    from regret_gateway.gateway.steering import published_ladder
    from regret_gateway.savings.report import savings_report
    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.queries import traffic_summary
    from regret_gateway.trainset.window import training_set

    try:
        settings = load_settings(config, store_url=url)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    _require_store(settings.store.url, config, "status")
    version = active_version_id(settings.artifacts_dir)
    since, art = None, None
    if version is None:
        typer.echo("active router: none (cold start: uniform exploration)")
    else:
        try:
            art = load_artifact(version_folder(settings.artifacts_dir, version))
            since = datetime.fromisoformat(art.created_at)
            age = datetime.now(timezone.utc) - since
            typer.echo(
                f"active router: {version}, created {art.created_at} ({age.total_seconds() / 3600:.1f} h ago), tiers {art.tiers}"
            )
        except ArtifactError as exc:
            typer.secho(f"active router: {version} is NOT loadable: {exc}", fg=typer.colors.RED)
    engine = make_engine(settings.store.url)
    try:
        from sqlalchemy.orm import Session

        with Session(engine) as session:
            summary = traffic_summary(session, since=since)
            # what the next retrain would read, by its rules: the rows it trains on and why the rest do not, whose
            # user scores count, and the judge's error it corrects by
            window = training_set(session, model_names=settings.models, since=since, trust=settings.trust,
                                  embedding_model=settings.embedder.embedding_id, embeddings=False)  # fmt: skip
            errors, agreement, trust = window.judge_errors, window.judge_self_agreement, window.team_checks
            now = datetime.now(timezone.utc)
            savings = savings_report(settings, session, now - timedelta(days=30), now, n_boot=200).teams
            budgets = [
                budget_status(
                    session, settings, team, now, published_ladder(art, team, spec.budget.ladder, spec.budget.drop_dominated)
                ).line()  # fmt: skip
                for team, spec in sorted(settings.teams.items())
                if spec.budget is not None
            ]
    except Exception as exc:  # noqa: BLE001
        _fail(exc)
    finally:
        engine.dispose()
    for line in summary.lines("since it was published" if since else "in total"):
        typer.echo(line)
    left_out = ", ".join(f"{k}={v:,}" for k, v in window.skipped.items() if v) or "none"
    typer.echo(f"retrain would read {window.n_rows:,} rows {'since it was published' if since else 'in total'} "
               f"(left out: {left_out})")  # fmt: skip
    if errors:  # the judge's error where users scored the same requests: what retrain corrects its scores by
        typer.echo("judge's error against user scores, per model judged: " + "; ".join(e.describe() for e in errors.values()))
    if agreement:  # the judge against itself where it judged an answer twice: what retrain corrects by without users
        typer.echo("judge against itself, per model judged: " + "; ".join(a.describe() for a in agreement.values()))
    for check in trust.values():  # whose user scores train the router (docs/operations.md)
        typer.secho(check.line(), fg=typer.colors.RED if check.kept == 0 else None)
    for line in budgets:
        typer.echo(line)
    for team in savings:  # what routing saved over the last 30 days (`regret-gateway report` says more)
        typer.echo(team.headline())


@app.command("report")
def report_cmd(
    config: Optional[Path] = CONFIG_OPTION,
    url: Optional[str] = URL_OPTION,
    window: str = typer.Option("30d", "--window", help="The last DURATION of requests, e.g. 7d, 30d, 12h."),
    team: Optional[str] = typer.Option(None, "--team", help="Only this team's requests."),
    html_out: Optional[Path] = typer.Option(None, "--html", help="Also write the report as one self-contained HTML page here."),
    n_boot: int = typer.Option(300, "--n-boot", min=50, help="Bootstrap resamples of the 95% intervals."),
) -> None:
    """What routing saved, in dollars, from the store's logs: per team and tier over the window, its requests,
    spend and served quality, and against every model alone (and the tier's fallback, and the dearest model)
    what the same requests would have cost and scored, with 95% intervals -- estimated off-policy from the
    logged propensities, no A/B test. Where the logs cannot support an estimate (a model too rarely logged)
    it says so instead of a number. docs/operations/monitoring.md#what-routing-saved says how to read it."""
    from sqlalchemy.orm import Session

    from regret_gateway.config import load_settings
    from regret_gateway.savings.html import report_html
    from regret_gateway.savings.report import savings_report
    from regret_gateway.store.engine import make_engine

    try:
        settings = load_settings(config, store_url=url)
        span = _duration(window, "--window")
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    _require_store(settings.store.url, config, "report")
    until = datetime.now(timezone.utc)
    engine = make_engine(settings.store.url)
    try:
        with Session(engine) as session:
            report = savings_report(settings, session, until - timedelta(seconds=span or 0), until, team=team, n_boot=n_boot)
    except Exception as exc:  # noqa: BLE001
        _fail(exc)
    finally:
        engine.dispose()
    typer.echo(report.text())
    if html_out is not None:
        html_out.parent.mkdir(parents=True, exist_ok=True)
        html_out.write_text(report_html(report, settings))
        typer.echo(f"wrote {html_out}")


@app.command("export-encoder")
def export_encoder_cmd(
    config: Optional[Path] = CONFIG_OPTION,
    out: Optional[Path] = typer.Option(None, "--out", help="Folder to write (must not exist; default <artifacts_dir>/encoder)."),
    kind: Optional[str] = typer.Option(
        None,
        "--kind",
        help="static: the static encoder distilled from the model (vectors + tokenizer, model2vec's layout) | "
        "transformer: the verified ONNX graph + tokenizer. Default: the config's embedder.kind.",
    ),
) -> None:
    """Publish the configured embedding model as a CPU encoder a gateway serves without torch or transformers:
    the static encoder distilled from it (numpy and tokenizers serve it), or its verified ONNX graph (ONNX
    Runtime), with its tokenizer and checksums in one folder. Run it where torch is installed (the `torch`
    extra), then set `embedder.exported` (and the same `embedder.kind`) in the gateway's config."""
    from regret_gateway.config import load_settings
    from regret_gateway.encoders.embedder import KINDS, Embedder
    from regret_gateway.encoders.exported import ExportError
    from regret_gateway.encoders.publish import publish_encoder

    _require_extra("export-encoder", "torch", ("torch", "transformers"))
    if kind is not None and kind not in KINDS:
        _fail(ValueError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}"))
    try:
        settings = load_settings(config)
        folder = out or Path(settings.artifacts_dir) / "encoder"
        spec = settings.embedder.model_copy(update={"exported": None, **({"kind": kind} if kind else {})})
        meta = publish_encoder(Embedder.from_settings(settings.model_copy(update={"embedder": spec}), progress=True), folder)
    except (ExportError, ValueError, FileNotFoundError) as exc:
        _fail(exc)
    if spec.kind == "static":
        typer.echo(f"published the static encoder of {meta['model']} ({meta['dim']}-d) in {folder}")
    else:
        typer.echo(f"published encoder of {meta['model']} ({meta['dim']}-d, {meta['graph']} graph, min cosine to torch "
                   f"{meta['cosine']:.6f}) in {folder}")  # fmt: skip
    typer.echo(f"serve it without torch: set `embedder: {{kind: {spec.kind}, exported: {folder}}}` in the gateway's config")
