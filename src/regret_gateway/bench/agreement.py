"""``regret-gateway bench backends``: do the embedding backends route the same?

On a full-feedback benchmark: every prompt is embedded by each encoder -- torch on CPU (the reference),
ONNX Runtime on CPU and, where CUDA is present, torch on the GPU (the same tokenizer, the same model; no
cache) -- a router -- the full-information regression network, the most embedding-sensitive kind the
project trains -- is fitted on the reference embeddings of the train split, and the test prompts are
routed once per encoder. Reported: each encoder's cosine to the reference (min, mean), the share of test
prompts whose chosen model differs from the reference's at each lambda, and the utility of each routing.
The encoders' times on the same texts are printed side by side.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class LambdaAgreement:
    """One lambda: each encoder's test utility (x100) and how many choices differ from torch on CPU's."""

    lam: float
    utility: dict[str, float]
    n_disagree: dict[str, int]


@dataclass(frozen=True)
class BackendAgreement:
    """``bench backends``'s result: embeddings and routing choices of each encoder against torch on CPU."""

    prompts: int
    test_prompts: int
    encoders: list[str]
    cosine_min: dict[str, float]
    cosine_mean: dict[str, float]
    seconds: dict[str, float]  # each encoder's time on the same texts
    rows: list[LambdaAgreement]

    def table(self) -> str:
        sec, others = self.seconds, [name for name in self.encoders if name != "torch"]
        lines = [f"{self.prompts} prompts ({self.test_prompts} routed); reference: torch on CPU"]
        for name in others:
            lines.append(f"cosine torch vs {name}: min {self.cosine_min[name]:.6f}, mean {self.cosine_mean[name]:.7f}; "
                         f"embedding time torch {sec['torch']:.1f} s, {name} {sec[name]:.1f} s ({sec['torch'] / sec[name]:.2f}x)")  # fmt: skip
        lines.append("| λ | " + " | ".join(f"choices that differ, {n}" for n in others) + " | "
                     + " | ".join(f"utility {n}" for n in self.encoders) + " |")  # fmt: skip
        lines.append("|---:|" + "---:|" * (len(others) + len(self.encoders)))
        for r in self.rows:
            differ = " | ".join(f"{r.n_disagree[n]} ({100 * r.n_disagree[n] / self.test_prompts:.2f}%)" for n in others)
            lines.append(f"| {r.lam:g} | {differ} | " + " | ".join(f"{u:.2f}" for u in r.utility.values()) + " |")
        return "\n".join(lines)


def backend_agreement(
    data: Path,
    *,
    lambdas: tuple[float, ...],
    limit: int | None = None,
    seed: int = 0,
    onnx_cache: Path | None = None,
) -> BackendAgreement:
    import torch

    from regret_gateway.data import FullFeedback
    from regret_gateway.encoders.embedder import Embedder, default_cache_dir
    from regret_gateway.evaluation.loaders import load_benchmark
    from regret_gateway.policy.registry import make_router
    from regret_gateway.policy.router import TrainingData

    bench = load_benchmark(data, limit=limit, seed=seed)
    texts = list(bench.prompts)
    embedders = {  # the reference first: torch on CPU
        "torch": Embedder(device="cpu", kind="transformer", backend="torch", progress=True),
        "onnx": Embedder(
            device="cpu",
            kind="transformer",
            backend="onnx",
            onnx_cache=onnx_cache or default_cache_dir("encoders"),
            progress=True,
        ),
    }
    if torch.cuda.is_available():
        embedders["torch-cuda"] = Embedder(device="cuda", kind="transformer", backend="torch", progress=True)
    X, seconds = {}, {}
    for name, embedder in embedders.items():
        embedder.encode(["warm-up"])
        started = time.perf_counter()
        X[name] = embedder.encode(texts)
        seconds[name] = time.perf_counter() - started
    if embedders["onnx"].backend_used != "onnx":
        raise RuntimeError(f"the ONNX encoder is not in use: {embedders['onnx'].backend_report}")
    others = [name for name in X if name != "torch"]
    cosine = {name: (X["torch"] * X[name]).sum(1) for name in others}
    split = bench.split
    train, val, test = (np.flatnonzero(split == s) for s in ("train", "val", "test"))
    if len(test) == 0 or len(val) == 0:
        order = np.random.default_rng(seed).permutation(len(texts))
        cut = len(order) // 5
        test, val, train = order[:cut], order[cut : 2 * cut], order[2 * cut :]

    def full(rows: np.ndarray, name: str = "torch") -> FullFeedback:
        return FullFeedback(X=X[name][rows], quality=bench.quality[rows], cost=bench.cost[rows], model_names=bench.model_names)

    router = make_router("full-info-regression", random_state=seed).fit(
        TrainingData.from_full(full(train), full(val)), list(lambdas)
    )
    rows: list[LambdaAgreement] = []
    n = np.arange(len(test))
    for lam in lambdas:
        picks = {name: router.predict(X[name][test], [lam])[0] for name in X}
        U = bench.quality[test] - lam * bench.cost[test]
        rows.append(
            LambdaAgreement(
                lam,
                utility={name: float(100 * U[n, p].mean()) for name, p in picks.items()},
                n_disagree={name: int(np.sum(picks["torch"] != picks[name])) for name in others},
            )
        )
    return BackendAgreement(
        prompts=len(texts),
        test_prompts=len(test),
        encoders=list(X),
        cosine_min={name: float(c.min()) for name, c in cosine.items()},
        cosine_mean={name: float(c.mean()) for name, c in cosine.items()},
        seconds=seconds,
        rows=rows,
    )
