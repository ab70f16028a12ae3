"""``regret-gateway bench backends``: do the torch and ONNX Runtime encoders route the same?

On a full-feedback benchmark: every prompt is embedded by both backends (the same tokenizer, the same
model; no cache for the ONNX side), a router -- the full-information regression network, the most
embedding-sensitive kind the project trains -- is fitted on the torch embeddings of the train split, and
the test prompts are routed twice, once per backend. Reported: the cosine between the two embeddings
(min, mean), the share of test prompts whose chosen model differs at each lambda, and the utility of
either routing. Timings of the two encoders on the same texts are printed side by side.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def backend_agreement(
    data: Path,
    *,
    lambdas: tuple[float, ...],
    limit: int | None = None,
    seed: int = 0,
    onnx_cache: Path | None = None,
) -> dict:
    from regret_gateway.data import FullFeedback
    from regret_gateway.embedding import Embedder, default_cache_dir
    from regret_gateway.evaluation.loaders import load_benchmark
    from regret_gateway.policy.base import TrainingData
    from regret_gateway.policy.registry import make_router

    bench = load_benchmark(data, limit=limit, seed=seed)
    texts = list(bench.prompts)
    embedders = {
        "torch": Embedder(device="cpu", backend="torch", progress=True),
        "onnx": Embedder(device="cpu", backend="onnx", onnx_cache=onnx_cache or default_cache_dir("onnx"), progress=True),
    }
    X, seconds = {}, {}
    for name, embedder in embedders.items():
        embedder.encode(["warm-up"])
        started = time.perf_counter()
        X[name] = embedder.encode(texts)
        seconds[name] = time.perf_counter() - started
    if embedders["onnx"].backend_used != "onnx":
        raise RuntimeError(f"the ONNX encoder is not in use: {embedders['onnx'].backend_report}")
    cosine = (X["torch"] * X["onnx"]).sum(1)
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
    rows = []
    for lam in lambdas:
        picks = {name: router.predict(X[name][test], [lam])[0] for name in X}
        U = bench.quality[test] - lam * bench.cost[test]
        n = np.arange(len(test))
        rows.append(
            {
                "lambda": lam,
                "disagree": float(np.mean(picks["torch"] != picks["onnx"])),
                "n_disagree": int(np.sum(picks["torch"] != picks["onnx"])),
                "utility_torch": float(100 * U[n, picks["torch"]].mean()),
                "utility_onnx": float(100 * U[n, picks["onnx"]].mean()),
            }
        )
    return {
        "prompts": len(texts),
        "test_prompts": len(test),
        "cosine_min": float(cosine.min()),
        "cosine_mean": float(cosine.mean()),
        "seconds": seconds,
        "rows": rows,
    }
