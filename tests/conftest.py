"""Shared fixtures: small synthetic worlds where the truth is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from regret_gateway.data import FullFeedback

SHARED_ROUTERBENCH = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "routerbench"


@pytest.fixture(autouse=True)
def _few_threads():
    torch.set_num_threads(2)


@pytest.fixture(scope="session", autouse=True)
def _one_encoder_cache(tmp_path_factory):
    """Every gateway of the session (in-process and `serve` processes) distils the static encoder once, into
    one cache (REGRET_GATEWAY_ENCODER_CACHE), instead of once per artifacts folder."""
    import os

    from regret_gateway.encoders.embedder import ENCODER_CACHE_ENV

    old = os.environ.get(ENCODER_CACHE_ENV)
    os.environ[ENCODER_CACHE_ENV] = str(tmp_path_factory.mktemp("encoders"))
    yield
    if old is None:
        os.environ.pop(ENCODER_CACHE_ENV, None)
    else:
        os.environ[ENCODER_CACHE_ENV] = old


def make_world(n: int = 1200, d: int = 8, seed: int = 0) -> FullFeedback:
    """Three models: 'small-a' is good on half the prompts, 'small-b' on the other half, 'large' is good
    everywhere but costs 20x more. The right model depends on x and on lambda."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    side = X[:, 0] > 0
    p_correct = np.stack([np.where(side, 0.9, 0.2), np.where(side, 0.2, 0.9), np.full(n, 0.95)], axis=1)
    quality = (rng.random((n, 3)) < p_correct).astype(float)
    cost = np.stack([np.full(n, 1e-4), np.full(n, 1e-4), np.full(n, 2e-3)], axis=1) * rng.uniform(0.8, 1.2, (n, 3))
    return FullFeedback(X=X, quality=quality, cost=cost, model_names=("small-a", "small-b", "large"))


@pytest.fixture
def world() -> FullFeedback:
    return make_world()


@pytest.fixture(scope="session")
def encoder(_one_encoder_cache):
    """The default encoder (the static one distilled from the bundled MiniLM), loaded once per test session:
    what a gateway with the default settings embeds with."""
    from regret_gateway.encoders.embedder import Embedder

    return Embedder(device="cpu", progress=False).encode
