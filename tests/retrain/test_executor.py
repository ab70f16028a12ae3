"""Where retrain's fits run (retrain/executor.py): locally by default, as Ray tasks with `--executor ray`; the
same logs and seed publish the same router on either."""

from __future__ import annotations

import numpy as np
import pytest

from regret_gateway.artifacts import active_version_id
from regret_gateway.retrain import RetrainOptions, retrain
from regret_gateway.retrain.executor import LocalExecutor, executor_named
from tests.retrain.test_pipeline import uniformly_logged, world  # noqa: F401 -- the module's fixture


def test_the_local_executor_runs_each_call_in_order_and_says_when_each_starts():
    started: list[int] = []
    assert LocalExecutor().map(pow, [(2, 3), (3, 2), (5, 0)], on_start=started.append) == [8, 9, 1]
    assert started == [0, 1, 2]
    assert executor_named("local").name == "local"
    with pytest.raises(ValueError, match="executor must be one of local, ray, got 'spark'"):
        executor_named("spark")
    with pytest.raises(ValueError, match="executor must be one of local, ray, got 'spark'"):
        RetrainOptions(executor="spark")


def _weights(settings) -> dict[str, np.ndarray]:
    from pathlib import Path

    root = Path(settings.artifacts_dir)
    with np.load(root / str(active_version_id(root)) / "weights.npz") as npz:
        return {k: npz[k] for k in npz.files}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_folds_fitted_as_ray_tasks_publish_the_router_the_local_fits_publish(tmp_path, world):  # noqa: F811
    """A local Ray (the machine's CPUs, started by the retrain) fits the five folds; the published weights
    and every tier's choice are those of the same retrain run here."""
    ray = pytest.importorskip("ray")
    settings, engine = uniformly_logged(tmp_path, world, 700, seed=11)
    here = settings.model_copy(update={"artifacts_dir": str(tmp_path / "local")})
    there = settings.model_copy(update={"artifacts_dir": str(tmp_path / "ray")})
    steps: list[str] = []
    try:
        local = retrain(here, engine, RetrainOptions(n_boot=50, seed=3))
        remote = retrain(there, engine, RetrainOptions(n_boot=50, seed=3, executor="ray"), progress=steps.append)
        assert ray.is_initialized()
    finally:
        ray.shutdown()
        engine.dispose()
    assert local.status == remote.status and local.status != "refused", (local.reason, remote.reason)
    assert [s for s in steps if s.startswith("fit ")][-1].startswith("fit 5 of 5 on "), steps
    assert [(r.tier, r.served, r.changed) for r in local.tiers] == [(r.tier, r.served, r.changed) for r in remote.tiers]
    a, b = _weights(here), _weights(there)
    assert a.keys() == b.keys() and a
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
