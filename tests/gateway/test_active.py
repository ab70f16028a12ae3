"""The version the gateway serves, without training anything (constant routers are published in a few
milliseconds): a new version is loaded once a reload is due, a broken one is refused once and remembered --
never probed again at each reload check -- and the version being served keeps serving."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from regret_gateway.artifacts import activate, save_artifact
from regret_gateway.config import EmbedderSpec, Settings
from regret_gateway.gateway.active import ActiveVersion
from regret_gateway.gateway.runtime import Gateway
from regret_gateway.servable.kinds import ConstantPolicy
from regret_gateway.servable.published import PublishedRouter

MODELS = ("a", "b")


def settings(tmp_path, **changes) -> Settings:
    return Settings.model_validate({"models": list(MODELS), "default_tier": "std", "tiers": {"std": {"lam": 0.0}},
                                    "artifacts_dir": str(tmp_path / "artifacts"),
                                    "store": {"url": f"sqlite:///{tmp_path}/gw.db", "spill_dir": str(tmp_path / "spill")},
                                    **changes})  # fmt: skip


def publish(tmp_path, model: str, *, broken: bool = False) -> str:
    router = PublishedRouter.serving(ConstantPolicy(MODELS, model), {"std": 0.0})
    path = save_artifact(tmp_path / "artifacts", router=router, embedder={"model": EmbedderSpec().embedding_id})
    if broken:  # a flipped byte (its checksum no longer matches), activated by hand: `activate` checks it
        with open(path / "weights.npz", "r+b") as fh:
            fh.seek(40)
            fh.write(b"\xff\xfe")
        (tmp_path / "artifacts" / "ACTIVE").write_text(path.name)
    else:
        activate(tmp_path / "artifacts", path.name)
    return path.name


def test_a_broken_version_is_refused_once_remembered_and_the_served_one_stays(tmp_path, monkeypatch):
    import regret_gateway.gateway.active as active

    good = publish(tmp_path, "b")
    version = ActiveVersion(settings(tmp_path))
    assert version.refresh() and version.artifact.version == good
    loads = []
    real = active.load_artifact
    monkeypatch.setattr(active, "load_artifact", lambda *a, **k: loads.append(a[0]) or real(*a, **k))
    bad = publish(tmp_path, "a", broken=True)
    for _ in range(5):  # every reload check after the refusal
        assert not version.refresh()
    assert len(loads) == 1 and bad in str(loads[0])  # probed once, then remembered
    assert version.artifact.version == good  # the served version was not dropped
    newer = publish(tmp_path, "a")
    assert version.refresh() and version.artifact.version == newer and version.reloads == 2


def test_an_idle_gateways_due_reload_loads_the_new_version(tmp_path):
    """``maybe_reload`` looks for a new version once ``reload_interval_s`` has passed, in a worker thread."""
    publish(tmp_path, "b")
    gw = Gateway(settings(tmp_path, reload_interval_s=0.001), encode=lambda t: np.ones((len(t), 4), np.float32), model_list=[])
    gw.start()
    try:
        assert gw.router.artifact is not None and gw.router.artifact.router.tier("std") is not None
        newer = publish(tmp_path, "a")
        swapped = threading.Event()
        real = gw.router.refresh
        gw.router.refresh = lambda: (real(), swapped.set())[0]  # type: ignore[method-assign]
        gw.maybe_reload()
        assert swapped.wait(30)
        assert gw.router.artifact.version == newer
    finally:
        gw.close()


@pytest.mark.parametrize("interval", [3600.0])
def test_a_reload_is_not_looked_for_before_it_is_due(tmp_path, interval):
    publish(tmp_path, "b")
    gw = Gateway(settings(tmp_path, reload_interval_s=interval), encode=lambda t: np.ones((len(t), 4), np.float32),
                 model_list=[])  # fmt: skip
    gw.start()
    try:
        first = gw.router.artifact.version
        publish(tmp_path, "a")
        gw.maybe_reload()  # started a moment ago: not due
        assert gw.router.artifact.version == first
    finally:
        gw.close()


def test_an_idle_gateway_loads_a_new_version_on_its_timer_before_any_request(tmp_path):
    """No request comes: the gateway's timer looks for a new version every ``reload_interval_s`` all the same,
    so the first request after a publish is routed by the new router, not by the old one."""
    publish(tmp_path, "b")
    gw = Gateway(settings(tmp_path, reload_interval_s=0.05), encode=lambda t: np.ones((len(t), 4), np.float32), model_list=[])
    gw.start()
    try:
        swapped = threading.Event()
        real = gw.router.refresh
        gw.router.refresh = lambda: (lambda changed: (changed and swapped.set(), changed)[1])(real())  # type: ignore[method-assign]
        newer = publish(tmp_path, "a")
        assert swapped.wait(30)  # nobody called maybe_reload: the timer did
        assert gw.router.artifact.version == newer
    finally:
        gw.close()
