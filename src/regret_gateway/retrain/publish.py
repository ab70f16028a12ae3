"""Publishing a router: the incumbent read back, the versioned artifact written, ``ACTIVE`` pointed at it and the
version recorded in the store, one publisher at a time."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from regret_gateway.artifacts import ArtifactError, RouterArtifact, activate, load_artifact, save_artifact, version_folder
from regret_gateway.config import Settings
from regret_gateway.retrain.gate import TierEvaluation
from regret_gateway.servable import PublishedRouter, ServedTier


def active_router(settings: Settings, active_id: str | None, data_info: dict) -> RouterArtifact | None:
    if active_id is None:
        return None
    try:
        return load_artifact(
            version_folder(settings.artifacts_dir, active_id),
            models=settings.models,
            embedder_model=settings.embedder.embedding_id,
        )
    except ArtifactError as exc:
        data_info["active_unreadable"] = str(exc)
        return None


def serving_now(active: RouterArtifact | None, model_names: tuple[str, ...]) -> dict[str, ServedTier]:
    """What ``active`` serves each tier, by name, each candidate carrying its version: the gate's incumbents
    (:func:`regret_gateway.retrain.gate.evaluate`). None where there is no active router or it routes over
    other models than ``model_names`` (its choices would not be these models)."""
    if active is None or active.model_names != model_names:
        return {}
    return {
        name: ServedTier(served.lam, served.candidate.of_version(active.version), served.policy)
        for name, served in active.router.tiers.items()
    }


PUBLISH_LOCK = ".publish-lock"  # in the artifact folder


def publish(settings: Settings, engine: Engine, router: PublishedRouter, rows: list[TierEvaluation], data_info: dict) -> Path:
    """Write the versioned artifact, point ``ACTIVE`` at it and add it to the store's version history."""
    from regret_gateway.store.locks import advisory_lock, file_lock
    from regret_gateway.store.writes import record_version

    root = Path(settings.artifacts_dir)
    tiers = [{**asdict(r), "changed": r.changed} for r in rows]
    metrics = json.loads(json.dumps({"tiers": tiers, "data": data_info}, default=float))  # plain JSON types
    e = settings.embedder
    embedder = {"model": e.model, "template": e.template, "id": e.embedding_id}
    path = save_artifact(root, router=router, embedder=embedder, metrics=metrics)
    # One publisher at a time, across processes and machines: the version ACTIVE names is the newest row.
    with file_lock(root / PUBLISH_LOCK), advisory_lock(engine, "publish"):
        activate(root, path.name)
        with Session(engine) as session, session.begin():
            record_version(session, path.name, str(path.resolve()), metrics)
    return path
