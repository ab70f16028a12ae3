"""The gateway serves a tier by its name from the published router: never by the nearest lambda."""

import logging

import numpy as np

from regret_gateway.artifacts import activate, save_artifact
from regret_gateway.config import Settings
from regret_gateway.gateway.decisions import ActiveRouter
from regret_gateway.servable import Candidate, ConstantPolicy, PublishedRouter, ServedTier

MODELS = ("tiny", "small", "large")


def test_two_tiers_of_one_lambda_each_get_their_own_policy_and_an_unpublished_tier_falls_back(tmp_path, caplog):
    greedy = {"lam": 100.0, "epsilon": 0.0}
    settings = Settings(
        models=MODELS, default_tier="chat", artifacts_dir=str(tmp_path / "artifacts"), embedder={"model": "m"},
        tiers={"chat": greedy, "batch": greedy, "added": {**greedy, "fallback": "tiny"}},
    )  # fmt: skip
    published = PublishedRouter(
        {"chat": ServedTier(100.0, Candidate("constant", "large"), ConstantPolicy(MODELS, "large")),
         "batch": ServedTier(100.0, Candidate("constant", "small"), ConstantPolicy(MODELS, "small"))}
    )  # fmt: skip
    path = save_artifact(tmp_path / "artifacts", router=published, embedder={"model": settings.embedder.embedding_id})
    activate(tmp_path / "artifacts", path.name)
    router = ActiveRouter(settings)
    with caplog.at_level(logging.WARNING, logger="regret_gateway.gateway.decisions"):
        assert router.refresh()
    assert "holds no policy for tier(s) added" in caplog.text  # said once, when the version is loaded
    x, rng = np.zeros(4, dtype=np.float32), np.random.default_rng(0)
    chat, batch = router.choose(x, "chat", rng), router.choose(x, "batch", rng)
    assert (chat.model, chat.mode, batch.model, batch.mode) == ("large", "policy", "small", "policy")
    added = router.choose(x, "added", rng)  # a tier added to the config since the retrain: its fallback
    assert (added.model, added.propensity, added.mode, added.router_version) == ("tiny", 1.0, "fallback", path.name)
    assert router.unpublished == 1
