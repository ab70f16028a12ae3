"""Versioned router bundles: a saved router routes exactly as before; anything off is refused."""

import copy
import json

import numpy as np
import pytest

from regret_gateway.artifacts import ArtifactError, activate, active_version_id, load_artifact, save_artifact
from regret_gateway.budgets.ladder import CHEAPEST, BudgetLadders, Ladder, Rung
from regret_gateway.nn.training import TrainConfig
from regret_gateway.policy.registry import make_router
from regret_gateway.servable import Candidate, ConstantPolicy, PublishedRouter, RMIntervalPolicy, ServedTier, from_state
from tests.policy.test_methods import setting  # noqa: F401  (module fixture)

MODELS = ("small-a", "small-b", "large")


@pytest.fixture(scope="module")
def router(setting):  # noqa: F811
    data, _, _, _ = setting
    return make_router("rm-interval", tiers=[0.0, 200.0], train=TrainConfig(max_epochs=100, patience=20), hidden=(32, 32)).fit(
        data, [0.0, 200.0]
    )


def test_round_trip_routes_identically_for_any_lambda(tmp_path, router, setting):  # noqa: F811
    _, _, test, _ = setting
    path = save_artifact(
        tmp_path, router=PublishedRouter.serving(router.to_policy(), {"p": 0.0, "e": 200.0}), embedder={"model": "m"}
    )
    assert active_version_id(tmp_path) is None
    activate(tmp_path, path.name)
    assert active_version_id(tmp_path) == path.name
    art = load_artifact(path, models=MODELS, embedder_model="m")
    assert art.tiers == {"p": 0.0, "e": 200.0}
    for lam in (0.0, 57.0, 200.0, 900.0):  # tier, between tiers (interval net), beyond the last tier
        np.testing.assert_allclose(art.router.logits("e", test.X, lam), router.route_logits(test.X, lam), rtol=1e-6)
    np.testing.assert_allclose(art.router.logits("e", test.X), router.route_logits(test.X, 200.0), rtol=1e-6)  # its own lambda
    assert json.loads((path / "manifest.json").read_text())["embedder"]["dim"] == test.X.shape[1]


def test_corrupted_or_incompatible_bundles_are_refused(tmp_path, router):
    path = save_artifact(
        tmp_path, router=PublishedRouter.serving(router.to_policy(), {"p": 0.0, "e": 200.0}), embedder={"model": "m"}
    )
    with pytest.raises(ArtifactError, match="routes to models the gateway does not serve"):
        load_artifact(path, models=("small-a", "large"))
    with pytest.raises(ArtifactError, match="trained on embeddings of 'm'"):
        load_artifact(path, embedder_model="other")
    with pytest.raises(ArtifactError, match="no manifest.json"):
        load_artifact(tmp_path / "nope")
    with pytest.raises(ValueError, match="3 outputs but 2 model names"):
        from_state(router.to_policy().state(), MODELS[:2])
    raw = bytearray((path / "weights.npz").read_bytes())
    raw[200] ^= 0xFF
    (path / "weights.npz").write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="checksum mismatch"):
        load_artifact(path)
    with pytest.raises(ArtifactError):
        activate(tmp_path, path.name)  # a version that does not load is never made active
    assert active_version_id(tmp_path) is None


def test_any_servable_policy_is_published_and_served(tmp_path, router, setting):  # noqa: F811
    """A constant model and R&C's outcome networks are published and served like RM-Interval."""
    data, _, test, _ = setting
    constant = ConstantPolicy(MODELS, "large")
    path = save_artifact(tmp_path, router=PublishedRouter.serving(constant, {"p": 0.0}), embedder={"model": "m"})
    art = load_artifact(path, models=MODELS)
    assert art.router.tiers["p"].candidate == Candidate("constant", "large")
    assert set(art.router.choose("p", test.X[:50], 123.0).tolist()) == {2}
    rc = make_router("r-and-c").fit(data, [0.0])
    path = save_artifact(tmp_path, router=PublishedRouter.serving(rc.to_policy(), {"p": 0.0}), embedder={"model": "m"})
    served = load_artifact(path, models=MODELS).router
    assert served.tiers["p"].candidate == Candidate("r-and-c")
    for lam in (0.0, 300.0):
        assert np.array_equal(served.choose("p", test.X, lam), rc.predict(test.X, [lam])[0])


def test_a_policy_refuses_inputs_of_the_wrong_size(router):
    policy = router.to_policy()
    assert isinstance(policy, RMIntervalPolicy)
    with pytest.raises(ValueError, match=r"`X` must have shape \(n, 8\)"):
        policy.logits(np.zeros((2, 5), dtype=np.float32), 0.0)
    with pytest.raises(ValueError, match="lambda must be finite and >= 0"):
        policy.logits(np.zeros((2, 8), dtype=np.float32), -1.0)


def test_each_tier_is_served_by_its_name_even_two_of_one_lambda(tmp_path, router, setting):  # noqa: F811
    """What retrain publishes: one policy per tier, found by the tier's name -- two tiers of one lambda each
    serve their own; a name the bundle does not hold is not served by a neighbour; a shared policy is
    stored once."""
    _, _, test, _ = setting
    rm = router.to_policy()
    constant = ConstantPolicy(MODELS, "large")
    published = PublishedRouter(
        {
            "premium": ServedTier(0.0, Candidate("rm-interval"), rm),
            "standard": ServedTier(200.0, Candidate("rm-interval"), rm),
            "batch": ServedTier(200.0, Candidate("constant", "large"), constant),
        }
    )
    path = save_artifact(tmp_path, router=published, embedder={"model": "m"})
    served = load_artifact(path, models=MODELS).router
    assert len(served.state()["policies"]) == 2 and served.tiers["premium"].policy is served.tiers["standard"].policy
    assert np.array_equal(served.choose("standard", test.X), rm.choose(test.X, 200.0))
    assert not np.array_equal(served.choose("standard", test.X), served.choose("batch", test.X))  # one lambda, two policies
    assert set(served.choose("batch", test.X).tolist()) == {2}
    assert served.tier("economy") is None
    with pytest.raises(KeyError, match="holds no tier 'economy'"):
        served.logits("economy", test.X)
    with pytest.raises(ValueError, match="same models"):
        PublishedRouter({"a": ServedTier(0.0, Candidate("rm-interval"), rm),
                         "b": ServedTier(1.0, Candidate("constant", "x"), ConstantPolicy(("x", "y", "z"), "x"))})  # fmt: skip
    assert served.utility_estimates(test.X, 0.0, "standard") is None  # RM-Interval's logits and a constant are not utilities


def test_a_published_router_carries_its_utility_estimator_and_ladders_through_an_artifact(tmp_path, router, setting):  # noqa: F811
    """Exploration's estimates survive save and load exactly, for every tier whatever it serves; so do the
    budget ladders, as typed values."""
    data, _, test, _ = setting
    estimator = make_router("r-and-c").fit(data, [0.0]).to_policy()
    ladders = BudgetLadders(tiers={"*": Ladder((Rung("tier", "p", 0.0, 0.01, 0.8), Rung(CHEAPEST, "", 500.0, 0.001, 0.5)))})
    published = PublishedRouter(
        {"p": ServedTier(0.0, Candidate("rm-interval"), router.to_policy()),
         "e": ServedTier(500.0, Candidate("constant", "large"), ConstantPolicy(MODELS, "large"))},
        estimator, ladders,
    )  # fmt: skip
    path = save_artifact(tmp_path, router=published, embedder={"model": "m"})
    served = load_artifact(path, models=MODELS).router
    for lam in (0.0, 500.0):
        np.testing.assert_allclose(served.utility_estimates(test.X, lam), estimator.logits(test.X, lam), rtol=1e-6)
    assert np.array_equal(served.choose("e", test.X), np.full(test.n_samples, 2))  # routing unchanged
    assert served.ladders == ladders and served.ladders.of("any-team", "tiers") == ladders.tiers["*"]
    assert served.ladders.of("any-team", "frontier") is None
    # an estimator that is also a tier's policy is stored once and comes back as that same policy
    shared = PublishedRouter(
        {"p": ServedTier(0.0, Candidate("r-and-c"), estimator),
         "e": ServedTier(500.0, Candidate("constant", "large"), ConstantPolicy(MODELS, "large"))},
        estimator,
    )  # fmt: skip
    assert len(shared.state()["policies"]) == 2
    path = save_artifact(tmp_path, router=shared, embedder={"model": "m"})
    back = load_artifact(path, models=MODELS).router
    assert back.estimator is back.tiers["p"].policy


def test_an_artifact_of_an_older_format_is_refused_in_one_line(tmp_path, router):
    """A format-2 bundle (tiers by lambda) is refused with the command that replaces it, not misread."""
    path = save_artifact(tmp_path, router=PublishedRouter.serving(router.to_policy(), {"p": 0.0}), embedder={"model": "m"})
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["format"] = 2
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match=r"a format-2 router \(tiers by lambda\).*run `regret-gateway retrain`") as info:
        load_artifact(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "manifest, message",
    [
        ([1, 2], "must be an object"),
        ({"format": 3, "version": "v", "embedder": {}, "files": {}, "router": {}}, r"model_names \(list\)"),
        (
            {"format": 3, "version": "v", "model_names": ["a", "b"], "embedder": "m", "files": {}, "router": {}},
            r"embedder \(dict\)",
        ),
        ({"format": 3, "version": "v", "model_names": ["a", "b"], "embedder": {}, "files": {}}, r"router \(dict\)"),
        (
            {"format": 3, "version": "v", "model_names": ["a"], "embedder": {}, "files": {}, "router": {}},
            "at least 2 distinct",
        ),
        # a router published before the numpy format: refused in one line that says what to do
        ({"format": 1, "version": "v", "model_names": ["a", "b"], "tiers": {}, "embedder": {}, "files": {}}, "retrain"),
    ],
)
def test_a_manifest_of_the_wrong_shape_is_refused(tmp_path, manifest, message):
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "weights.npz").write_bytes(b"x")
    with pytest.raises(ArtifactError, match=message):
        load_artifact(tmp_path)


def test_an_artifact_for_another_embedding_size_is_refused(tmp_path, router):
    path = save_artifact(tmp_path, router=PublishedRouter.serving(router.to_policy(), {"p": 0.0}), embedder={"model": "m"})
    assert load_artifact(path, embedding_dim=8).router.dim == 8
    with pytest.raises(ArtifactError, match="reads 8-d embeddings, the gateway's embedder gives 384-d"):
        load_artifact(path, embedding_dim=384)


def _first_array(state):
    """The first weight array of a policy's state (nested dicts and lists)."""
    if isinstance(state, np.ndarray):
        return state
    children = state.values() if isinstance(state, dict) else state if isinstance(state, (list, tuple)) else ()
    for child in children:
        if (found := _first_array(child)) is not None:
            return found
    return None


def test_an_artifact_that_would_fail_every_routed_request_is_refused_at_load(tmp_path, router):
    """NaN weights behind a valid checksum, and a version id the store's column cannot hold, are refused when
    the artifact is loaded (not served until every decision record is refused)."""
    state = copy.deepcopy(router.to_policy().state())  # the state shares the fitted router's arrays
    _first_array(state).fill(float("nan"))
    path = save_artifact(
        tmp_path, router=PublishedRouter.serving(from_state(state, MODELS), {"p": 0.0, "e": 200.0}), embedder={"model": "m"}
    )
    with pytest.raises(ArtifactError, match="lambda 0 are not finite"):
        load_artifact(path, models=MODELS)
    long_id = "v" * 65
    good = save_artifact(tmp_path, router=PublishedRouter.serving(router.to_policy(), {"p": 0.0}), embedder={"model": "m"})
    manifest = json.loads((good / "manifest.json").read_text())
    (tmp_path / long_id).mkdir()
    for name in ("weights.npz", "manifest.json"):
        (tmp_path / long_id / name).write_bytes((good / name).read_bytes())
    (tmp_path / long_id / "manifest.json").write_text(json.dumps({**manifest, "version": long_id}))
    with pytest.raises(ArtifactError, match="printable id of <= 64 characters"):
        load_artifact(tmp_path / long_id, models=MODELS)
    with pytest.raises(ArtifactError, match="must be 1-64 printable characters"):
        save_artifact(
            tmp_path,
            router=PublishedRouter.serving(router.to_policy(), {"p": 0.0}),
            embedder={"model": "m"},
            version=long_id + "x",
        )
    assert load_artifact(good, models=MODELS).version == good.name  # the checks pass a sound artifact


@pytest.mark.parametrize("pointer", ["absolute", "dotdot", "link"])
def test_an_active_pointer_out_of_the_artifacts_folder_is_refused_once_and_never_served(tmp_path, router, pointer, monkeypatch):
    """ACTIVE may only name a version folder of the artifacts directory: an absolute path, ``../..`` or a
    link to a router elsewhere is refused, and not loaded again at every check."""
    from regret_gateway.config import Settings
    from regret_gateway.gateway import active as served
    from regret_gateway.gateway import decisions

    elsewhere = tmp_path / "elsewhere"
    outside = save_artifact(elsewhere, router=PublishedRouter.serving(router.to_policy(), {"p": 0.0}), embedder={"model": "m"})
    root = tmp_path / "artifacts"
    root.mkdir()
    if pointer == "absolute":
        named = str(outside)
    elif pointer == "dotdot":
        named = f"../elsewhere/{outside.name}"
    else:
        (root / outside.name).symlink_to(outside)
        named = outside.name
    (root / "ACTIVE").write_text(named + "\n")
    loads = []
    real_load = served.load_artifact
    monkeypatch.setattr(served, "load_artifact", lambda *a, **k: loads.append(a) or real_load(*a, **k))
    settings = Settings(models=MODELS, default_tier="p", tiers={"p": {"lam": 0.0}}, artifacts_dir=str(root),
                        embedder={"model": "m"})  # fmt: skip
    active = decisions.ActiveRouter(settings)
    for _ in range(10):
        assert not active.refresh()
    assert active.artifact is None and loads == []
