"""Versioned router bundles: a saved router routes exactly as before; anything off is refused."""

import json

import numpy as np
import pytest

from regret_gateway.artifacts import ArtifactError, activate, active_version_id, load_artifact, save_artifact
from regret_gateway.policy.methods import make_router
from regret_gateway.policy.training import TrainConfig
from tests.policy.test_methods import setting  # noqa: F401  (module fixture)

MODELS = ("small-a", "small-b", "large")


@pytest.fixture(scope="module")
def router(setting):  # noqa: F811
    data, _, _ = setting
    return make_router("rm-interval", tiers=[0.0, 200.0], train=TrainConfig(max_epochs=100, patience=20), hidden=(32, 32)).fit(data, [0.0, 200.0])


def test_round_trip_routes_identically_for_any_lambda(tmp_path, router, setting):  # noqa: F811
    _, _, test = setting
    path = save_artifact(tmp_path, router=router, model_names=MODELS, tiers={"p": 0.0, "e": 200.0}, embedder={"model": "m"})
    assert active_version_id(tmp_path) is None
    activate(tmp_path, path.name)
    assert active_version_id(tmp_path) == path.name
    art = load_artifact(path, models=MODELS, embedder_model="m")
    for lam in (0.0, 57.0, 200.0, 900.0):  # tier, between tiers (interval net), beyond the last tier
        np.testing.assert_allclose(art.logits(test.X, lam), router.route_logits(test.X, lam).numpy(), rtol=1e-6)
    assert json.loads((path / "manifest.json").read_text())["embedder"]["dim"] == test.X.shape[1]


def test_corrupted_or_incompatible_bundles_are_refused(tmp_path, router):
    path = save_artifact(tmp_path, router=router, model_names=MODELS, tiers={"p": 0.0, "e": 200.0}, embedder={"model": "m"})
    with pytest.raises(ArtifactError, match="routes to models the gateway does not serve"):
        load_artifact(path, models=("small-a", "large"))
    with pytest.raises(ArtifactError, match="trained on embeddings of 'm'"):
        load_artifact(path, embedder_model="other")
    with pytest.raises(ArtifactError, match="no manifest.json"):
        load_artifact(tmp_path / "nope")
    with pytest.raises(ArtifactError, match="3 outputs but 2 model names"):
        save_artifact(tmp_path, router=router, model_names=MODELS[:2], tiers={}, embedder={"model": "m"})
    raw = bytearray((path / "weights.pt").read_bytes())
    raw[200] ^= 0xFF
    (path / "weights.pt").write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="checksum mismatch"):
        load_artifact(path)
    with pytest.raises(ArtifactError):
        activate(tmp_path, path.name)  # a version that does not load is never made active
    assert active_version_id(tmp_path) is None
