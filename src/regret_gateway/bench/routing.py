"""``regret-gateway bench routing``: the routing step alone, embedding given, and the cost of logging it.

A router of the production shape (what retrain publishes: a 3-tier RM-Interval, 200x200 per tier, and
R&C's outcome networks as the exploration estimator; random weights: its cost does not depend on them) is
published and loaded by the gateway's own ``ActiveRouter``; then, on one thread:
``choose`` for one request at a time (greedy, uniform and IGW exploration -- IGW runs the artifact's
utility estimates as well), the policy's forward pass on batches (routes per second; numpy, as served)
beside the same tier network run by torch (and by torch on the GPU where CUDA is present), and the hook's logging step (building the decision record and handing it to the batched writer's queue).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class StepTiming:
    """One timed step: per-call p50 and p99 in microseconds; routes per second for a forward pass."""

    step: str
    p50_us: float
    p99_us: float
    routes_per_s: float | None = None


@dataclass(frozen=True)
class RoutingBench:
    """``bench routing``'s result: each step's timing, one thread, one run."""

    dim: int
    rows: list[StepTiming]

    def table(self) -> str:
        lines = [f"what retrain publishes: 3-tier RM-Interval (200x200 per tier) + R&C estimator, {self.dim}-d embeddings",
                 "| step | p50 µs | p99 µs | routes/s |", "|---|---:|---:|---:|"]  # fmt: skip
        for r in self.rows:
            rate = "-" if r.routes_per_s is None else f"{r.routes_per_s:,.0f}"
            lines.append(f"| {r.step} | {r.p50_us:.0f} | {r.p99_us:.0f} | {rate} |")
        return "\n".join(lines)


def _per_call_us(fn, n: int) -> tuple[float, float]:
    """(p50, p99) microseconds of ``fn()`` over ``n`` calls after a warm-up."""
    for _ in range(min(50, n)):
        fn()
    times = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
    return float(np.percentile(times, 50) * 1e6), float(np.percentile(times, 99) * 1e6)


def run_routing_bench(*, calls: int = 2000, dim: int = 384, batch: int = 1024) -> RoutingBench:
    from regret_gateway.bench.hook_latency import _publish_random_router
    from regret_gateway.config import EmbedderSpec

    rng = np.random.default_rng(0)
    X = rng.normal(size=(batch, dim)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        tiers = {"premium": 0.0, "standard": 200.0, "economy": 1000.0}
        spec = EmbedderSpec()  # the default embedder's id: what the settings below serve
        _publish_random_router(tmp / "artifacts", dim, tiers, spec.model, spec.embedding_id)
        rows, artifact = _choose_rows(tmp / "artifacts", tiers, dim, X, rng, calls)
        for n in (1, 32, batch):
            p50, p99 = _per_call_us(
                lambda n=n: artifact.router.logits("standard", X[:n], 200.0), max(20, calls // max(1, n // 32))
            )
            rows.append(StepTiming(f"policy forward, batch {n}", p50, p99, n / (p50 / 1e6)))
        rows += _torch_rows(artifact, X, dim, calls)
        rows.append(_log_row(tmp, X, calls, spec.embedding_id))
    return RoutingBench(dim, rows)


def _choose_rows(artifacts: Path, tiers: dict[str, float], dim: int, X: np.ndarray, rng, calls: int):
    """(one request's choose timed under each exploration rule, the router loaded): the gateway's routing step."""
    from regret_gateway.bench.hook_latency import MODELS
    from regret_gateway.config import Settings
    from regret_gateway.gateway.decisions import ActiveRouter

    rows: list[StepTiming] = []
    for rule, epsilon in (("greedy", 0.0), ("uniform", 0.05), ("igw", 0.05)):
        settings = Settings.model_validate(
            {
                "models": list(MODELS),
                "default_tier": "standard",
                "tiers": {
                    k: {"lam": v, "epsilon": epsilon, "exploration": "uniform" if rule == "greedy" else rule}
                    for k, v in tiers.items()
                },  # fmt: skip
                "artifacts_dir": str(artifacts),
            }
        )
        router = ActiveRouter(settings, dim)
        if not router.refresh():
            raise RuntimeError("the benchmark router did not load")
        k = iter(range(10**9))
        p50, p99 = _per_call_us(lambda r=router, k=k: r.choose(X[next(k) % len(X)], "standard", rng), calls)
        rows.append(StepTiming(f"choose, one request ({rule})", p50, p99))
    artifact = router.artifact
    assert artifact is not None
    return rows, artifact


def _torch_rows(artifact, X: np.ndarray, dim: int, calls: int) -> list[StepTiming]:
    """The same tier network run by torch, as the gateway did before routing moved to numpy (and on CUDA where
    there is one)."""
    import torch

    from regret_gateway.nn.networks import StackedMLP

    arrays = artifact.router.tiers["standard"].policy.tier_arrays  # type: ignore[attr-defined]
    tier_net = StackedMLP.from_arrays(arrays.weights, arrays.biases)
    x1 = torch.as_tensor(X[:1])
    with torch.no_grad():
        p50, p99 = _per_call_us(lambda: tier_net(x1), calls)
    rows = [StepTiming("the same forward in torch, batch 1", p50, p99, 1 / (p50 / 1e6))]
    if torch.cuda.is_available():
        rows += _cuda_rows(tier_net, dim, calls)
    return rows


def _log_row(tmp: Path, X: np.ndarray, calls: int, embedding_id: str) -> StepTiming:
    """One decision's record built and queued for the store's writer (SQLite in ``tmp``)."""
    from regret_gateway.bench.hook_latency import MODELS
    from regret_gateway.store.engine import make_engine
    from regret_gateway.store.migrate import upgrade
    from regret_gateway.store.records import DecisionRecord, prompt_hash
    from regret_gateway.store.writer import BatchedWriter

    url = f"sqlite:///{tmp}/bench.db"
    upgrade(url)
    engine = make_engine(url)
    writer = BatchedWriter(engine, tmp / "spill", queue_size=calls + 100).start()
    key = b"bench-key"
    i = iter(range(10**9))

    def log_one() -> None:
        j = next(i)
        writer.submit(
            DecisionRecord(
                request_id=f"rg-{j}",
                tier="standard",
                lam=200.0,
                team="t",
                router_version="v",
                embedding_model=embedding_id,
                embedding=X[j % len(X)],
                chosen_model=MODELS[0],
                propensity=0.95,
                mode="policy",
                prompt_hash=prompt_hash(f"prompt {j}", key),
            )  # fmt: skip
        )

    p50, p99 = _per_call_us(log_one, calls)
    writer.close()
    engine.dispose()
    return StepTiming("log a decision (record + queue)", p50, p99)


def _cuda_rows(tier_net, dim: int, calls: int) -> list[StepTiming]:
    """The tier network's forward pass on the GPU, each call timed to the end of its kernels (the result
    copied back to the host): batch 1, and batches of 1,024 and 25,000 (the paper's timing: 25,000 prompts
    on one A100)."""
    import torch

    net = tier_net.to("cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for n in (1, 1024, 25_000):
        x = torch.nn.functional.normalize(torch.randn(n, dim, device="cuda", generator=gen), dim=1)

        def forward(x=x) -> None:
            with torch.no_grad():
                net(x).argmax(dim=-1).cpu()

        p50, p99 = _per_call_us(forward, max(20, calls // max(1, n // 1024)))
        rows.append(StepTiming(f"the same forward in torch on CUDA, batch {n:,}", p50, p99, n / (p50 / 1e6)))
    tier_net.to("cpu")
    return rows
