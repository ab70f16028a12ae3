"""``db export`` into a folder: the training set as Parquet parts, one per time slice, and a manifest.

The hand-off to an engine past one machine (docs/operations.md): each part is what
:func:`~regret_gateway.store.training_set.training_set` reads for its slice (the same rows, the same best
score per request, the same columns as a one-file export), so memory follows one slice, not the window.
``manifest.json`` is written last: a folder without it is an export that did not finish. It lists every
part with its rows, time bounds and SHA-256, the window, the embedding model and what was left out.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from regret_gateway.store.schema import Decision
from regret_gateway.store.training_set import EXPORT_COLUMNS, export_training_set, training_set

MANIFEST = "manifest.json"
FORMAT = "regret-gateway training set, Parquet parts"


@dataclass(frozen=True)
class Part:
    file: str  # relative to the folder
    rows: int
    since: str  # ISO 8601, inclusive
    until: str  # ISO 8601, exclusive
    sha256: str


def _utc(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=timezone.utc)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ExportWindow:
    """What an export covers: [since, until), cut into ``slices`` parts of ``slice_s`` seconds at most."""

    since: datetime
    until: datetime
    slice_s: float
    team: str | None
    embedding_model: str | None
    model_names: tuple[str, ...]  # every model the window's routed decisions chose: every part the same

    @property
    def slices(self) -> int:
        return max(1, -int(-(self.until - self.since).total_seconds() // self.slice_s))


def export_window(session: Session, *, slice_s: float = 86_400.0, since: datetime | None = None,
                  until: datetime | None = None, team: str | None = None,
                  embedding_model: str | None = None) -> ExportWindow:  # fmt: skip
    """The window to export: the given bounds, else from the first decision to the last. The embedding
    model is, unless given, the one most of the window's routed decisions were embedded with; the models,
    every one they chose (every part the same). Raises ValueError for a store (or team) with no decision."""
    if slice_s <= 0:
        raise ValueError("the slice must be longer than 0 s")
    scope = [Decision.team == team] if team is not None else []
    first, last = session.execute(select(func.min(Decision.created_at), func.max(Decision.created_at)).where(*scope)).one()
    if first is None:
        raise ValueError("the store holds no decision to export" + (f" for team {team!r}" if team else ""))
    start = _utc(since) if since is not None else _utc(first)
    end = _utc(until) if until is not None else _utc(last) + timedelta(microseconds=1)
    routed = [*scope, Decision.mode != "fallback", Decision.created_at >= start, Decision.created_at < end]
    models = tuple(session.scalars(select(Decision.chosen_model).where(*routed).distinct().order_by(Decision.chosen_model)))
    if embedding_model is None:
        embedding_model = session.execute(
            select(Decision.embedding_model).where(*routed).group_by(Decision.embedding_model)
            .order_by(func.count().desc(), Decision.embedding_model).limit(1)
        ).scalar()  # fmt: skip
    return ExportWindow(start, end, slice_s, team, embedding_model, models)


def export_parts(session: Session, folder: str | Path, window: ExportWindow,
                 on_slice: Callable[[int], None] | None = None) -> dict:  # fmt: skip
    """Write the window's training set into ``folder`` (new or empty) as ``part-NNNNN.parquet``, one per
    slice that holds rows, then ``manifest.json``; returns the manifest. ``on_slice(1)`` after each slice
    (a progress bar). Raises ValueError for a folder that is not empty."""
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValueError(f"{folder} exists and is not an empty folder: export into a new one")
    folder.mkdir(parents=True, exist_ok=True)
    parts: list[Part] = []
    left_out: dict[str, int] = {}
    dim = None
    step = timedelta(seconds=window.slice_s)
    a = window.since
    while a < window.until:
        b = min(a + step, window.until)
        ts = training_set(session, since=a, until=b, team=window.team, embedding_model=window.embedding_model,
                          model_names=window.model_names)  # fmt: skip
        for k, v in ts.skipped.items():
            left_out[k] = left_out.get(k, 0) + v
        if ts.logged is not None:
            dim = int(ts.logged.X.shape[1])
            path = export_training_set(ts, folder / f"part-{len(parts):05d}.parquet")
            parts.append(Part(path.name, ts.n_rows, a.isoformat(), b.isoformat(), _sha256(path)))
        if on_slice is not None:
            on_slice(1)
        a = b
    manifest = {
        "format": FORMAT,
        "version": 1,
        "written_at": datetime.now(timezone.utc).isoformat(),
        "window": {
            "since": window.since.isoformat(),
            "until": window.until.isoformat(),
            "team": window.team,
            "slice_s": window.slice_s,
        },  # fmt: skip
        "embedding_model": window.embedding_model,
        "models": list(window.model_names),
        "dim": dim,
        "columns": [*EXPORT_COLUMNS, *(f"x{j}" for j in range(dim or 0))],
        "rows": sum(p.rows for p in parts),
        "left_out": left_out,
        "parts": [asdict(p) for p in parts],
    }
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    os.replace(tmp, folder / MANIFEST)
    return manifest
