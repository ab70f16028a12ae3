"""`db export` into a folder: Parquet parts, one per time slice, and a manifest that lists them; together
they are the window's training set. SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from sqlalchemy.orm import Session

from regret_gateway.store.export import MANIFEST, export_parts, export_window
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.training_set import training_set
from regret_gateway.store.writes import record_decisions, record_feedback

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def test_parts_with_their_manifest_are_the_window_s_training_set(engine, tmp_path):
    pd = pytest.importorskip("pandas")
    hours = [1, 2, 5, 30, 31, 75]  # day 0: 3 rows, day 1: 2, day 2: none, day 3: 1
    records = [
        DecisionRecord(
            request_id=f"e{i}",
            tier="t",
            lam=1.0,
            embedding_model="m",
            embedding=np.full(3, i, dtype=np.float32),
            chosen_model=("a", "b")[i % 2],
            propensity=0.5,
            created_at=T0 + timedelta(hours=h),
            outcome=OutcomeRecord(f"e{i}", cost_usd=0.001),
        )  # fmt: skip
        for i, h in enumerate(hours)
    ]
    with Session(engine) as s, s.begin():
        record_decisions(s, records)
        record_feedback(s, [FeedbackRecord(f"e{i}", i / 10) for i in range(len(hours)) if i != 4])  # e4 unscored
    out = tmp_path / "export"
    with Session(engine) as s:
        window = export_window(s, slice_s=86_400.0)
        manifest = export_parts(s, out, window)
        whole = training_set(s)
    assert window.slices == 4 and window.embedding_model == "m"
    assert [p["rows"] for p in manifest["parts"]] == [3, 1, 1] and manifest["rows"] == 5  # day 2 wrote no part
    assert manifest["left_out"]["no_feedback"] == 1 and manifest["dim"] == 3
    assert json.loads((out / MANIFEST).read_text()) == manifest
    for part in manifest["parts"]:
        assert hashlib.sha256((out / part["file"]).read_bytes()).hexdigest() == part["sha256"]
    frame = pd.concat([pd.read_parquet(out / p["file"]) for p in manifest["parts"]], ignore_index=True)
    assert list(frame.columns) == manifest["columns"]
    assert list(frame["request_id"]) == list(whole.request_ids)
    np.testing.assert_array_equal(frame[["x0", "x1", "x2"]].to_numpy(), whole.logged.X)
    np.testing.assert_allclose(frame["quality"], whole.logged.quality)
    with Session(engine) as s, pytest.raises(ValueError, match="not an empty folder"):
        export_parts(s, out, window)
