"""Bulk score imports: streamed in chunks, every bad row reported by its line, all or nothing unless asked."""

from __future__ import annotations

import json

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from regret_gateway.store.feedback_import import import_feedback
from regret_gateway.store.records import DecisionRecord
from regret_gateway.store.schema import Feedback
from regret_gateway.store.writes import record_decisions


def _decisions(engine, n: int) -> None:
    with Session(engine) as s, s.begin():
        record_decisions(s, [DecisionRecord(request_id=f"r{i}", tier="t", lam=0.0, embedding_model="m", embedding=np.ones(3),
                                            chosen_model="a", propensity=1.0) for i in range(n)])  # fmt: skip


def _scores(engine) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count()).select_from(Feedback)) or 0


def test_every_invalid_row_is_reported_by_line_and_nothing_is_written(engine, tmp_path):
    _decisions(engine, 3)
    path = tmp_path / "scores.jsonl"
    path.write_text('{"request_id": "r0", "score": 1}\n{"request_id": "r1", "score": 0.5\n\n[1, 2]\n'
                    '{"request_id": "r2", "score": 7}\n{"request_id": "r2"}\n{"request_id": "r2", "score": 0}\n')  # fmt: skip
    seen: list[tuple[int, str]] = []
    result = import_feedback(engine, path, on_invalid=lambda line, why: seen.append((line, why)))
    assert [line for line, _ in seen] == [2, 4, 5, 6]
    assert "not valid JSON" in seen[0][1] and "must be in [0, 1]" in seen[2][1] and "needs request_id and score" in seen[3][1]
    assert not result.committed and result.imported == 0 and result.invalid == 4 and _scores(engine) == 0
    kept = import_feedback(engine, path, skip_invalid=True)
    assert kept.committed and kept.imported == 2 and kept.invalid == 4 and _scores(engine) == 2


def test_large_files_stream_in_chunks_and_unknown_ids_are_skipped_in_one_pass(engine, tmp_path):
    _decisions(engine, 50)
    path = tmp_path / "scores.csv"
    rows = [f"r{i},0.5" for i in range(50)] + [f"ghost-{i},1" for i in range(2000)]
    path.write_text("request_id,score\n" + "\n".join(rows) + "\n")
    chunks: list[int] = []
    refused = import_feedback(engine, path, chunk_rows=300, on_chunk=chunks.append)
    assert chunks == [300] * 6 + [250] and refused.rows == 2050
    assert (
        not refused.committed
        and refused.unknown == 2000
        and refused.unknown_examples[:2] == ["ghost-0", "ghost-1"]
        and len(refused.unknown_examples) == 5
    )
    assert _scores(engine) == 0
    partial = import_feedback(engine, path, chunk_rows=300, skip_unknown=True)
    assert partial.committed and partial.imported == 50 and partial.unknown == 2000 and _scores(engine) == 50


def test_the_cli_reports_bad_lines_and_imports_the_rest_when_asked(engine, tmp_path):
    from typer.testing import CliRunner

    from regret_gateway.cli import app

    _decisions(engine, 2)
    path = tmp_path / "scores.jsonl"
    path.write_text("\n".join([json.dumps({"request_id": "r0", "score": 1}), "{oops", json.dumps({"request_id": "r1", "score": -1}),
                               json.dumps({"request_id": "r1", "score": 0.25})]) + "\n")  # fmt: skip
    url = engine.url.render_as_string(hide_password=False)
    refused = CliRunner().invoke(app, ["feedback", "import", str(path), "--url", url])
    assert refused.exit_code == 2 and "line 2: not valid JSON" in refused.output and "line 3:" in refused.output
    assert "nothing imported: 2 invalid rows" in refused.output and _scores(engine) == 0
    kept = CliRunner().invoke(app, ["feedback", "import", str(path), "--url", url, "--skip-invalid"])
    assert kept.exit_code == 0 and "imported 2 scores" in kept.output and "skipped 2 invalid rows" in kept.output
