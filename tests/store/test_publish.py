"""Publishing a router is one step across processes: concurrent retrains each add their version to the
store's history, and the ACTIVE pointer names the newest."""

from __future__ import annotations

import threading

from sqlalchemy import select
from sqlalchemy.orm import Session

from regret_gateway.artifacts import active_version_id
from regret_gateway.config import Settings
from regret_gateway.retrain.publish import publish
from regret_gateway.servable import ConstantPolicy, PublishedRouter
from regret_gateway.store.schema import RouterVersion

MODELS = ("a", "b")


def test_concurrent_publishers_each_add_a_version_and_active_names_the_newest(engine, tmp_path):
    settings = Settings.model_validate({"models": MODELS, "tiers": {"standard": {"lam": 0}}, "artifacts_dir": str(tmp_path)})
    publishers, rounds = 4, 6
    for round_ in range(1, rounds + 1):
        start = threading.Barrier(publishers)
        errors: list[BaseException] = []

        def one(start: threading.Barrier = start, errors: list = errors) -> None:
            try:
                start.wait()
                publish(settings, engine, PublishedRouter.serving(ConstantPolicy(MODELS, "a"), {"standard": 0.0}), [], {})
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(publishers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        with Session(engine) as session:
            history = session.scalars(select(RouterVersion.id).order_by(RouterVersion.created_at)).all()
        assert len(history) == len(set(history)) == publishers * round_
        assert active_version_id(tmp_path) == history[-1]  # the last publisher under the lock is the one served
