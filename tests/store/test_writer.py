"""The batched writer: nothing lost and nothing stored twice when the database drops, bounded memory,
spill files replayed on recovery and after a restart. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
import tracemalloc
from types import SimpleNamespace

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from regret_gateway.bench.store import synthetic_records
from regret_gateway.store.engine import make_engine
from regret_gateway.store.schema import Decision, Outcome
from regret_gateway.store.writer import BatchedWriter
from tests.store.faults import SqliteLock, TcpProxy


@pytest.fixture
def flaky(engine, db_url):
    """An engine for the same database whose connection the test can break and restore."""
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        fault = SqliteLock(url.database)
        eng = make_engine(db_url, sqlite_busy_timeout_ms=20)
    else:
        fault = TcpProxy(url.host, url.port or 5432)
        eng = make_engine(
            url.set(host="127.0.0.1", port=fault.port).render_as_string(hide_password=False), connect_args={"connect_timeout": 2}
        )
    yield SimpleNamespace(engine=eng, down=fault.down, up=fault.up)
    fault.up()
    eng.dispose()


def rows(engine) -> tuple[int, int, int]:
    with Session(engine) as s:
        return (
            s.scalar(select(func.count()).select_from(Decision)),
            s.scalar(select(func.count(func.distinct(Decision.request_id)))),
            s.scalar(select(func.count()).select_from(Outcome)),
        )


def fast_writer(engine, spill_dir, **kw) -> BatchedWriter:
    opts = dict(queue_size=1000, batch_size=250, flush_interval_s=0.02, retry_initial_s=0.02, retry_max_s=0.2, spill_after_s=0.2)
    return BatchedWriter(engine, spill_dir, **{**opts, **kw})


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_20k_decisions_survive_an_outage(engine, flaky, tmp_path):
    n, dim = 20_000, 64
    # what n records would weigh if something kept them all in memory
    tracemalloc.start()
    sample = list(synthetic_records(1000, dim, seed=1, prefix="probe"))
    footprint = tracemalloc.get_traced_memory()[0] * n / len(sample)
    del sample
    tracemalloc.stop()
    # what the writer keeps by design beside its bounded queue: the ids of the decisions it committed (up to
    # 100,000), so that an outcome submitted later is written alone
    tracemalloc.start()
    ids = {f"req-{i:08d}": None for i in range(n)}
    id_window = tracemalloc.get_traced_memory()[0]
    del ids
    tracemalloc.stop()

    writer = fast_writer(flaky.engine, tmp_path / "spill").start()
    tracemalloc.start()
    down_at = None
    for i, record in enumerate(synthetic_records(n, dim)):
        if i == 4_000:
            flaky.down()
            down_at = time.monotonic()
        if i == 14_000:
            time.sleep(max(0.0, 1.5 - (time.monotonic() - down_at)))  # an outage of at least 1.5 s
            flaky.up()
        writer.submit(record)
        if i % 100 == 0:
            time.sleep(0.001)  # paced traffic, not one burst
    assert writer.drain(timeout=240), writer.stats()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    stats = writer.stats()
    writer.close()

    assert rows(engine) == (n, n, n)  # every decision and outcome, none twice
    # a batch whose COMMIT the cut connection left in doubt is spilled, replayed and found stored: at most
    # one batch (250) per outage counts as already held, the rest are new
    assert stats.written == n and stats.new_rows + stats.duplicates == n and stats.duplicates <= 250 * stats.outages
    assert stats.dropped == 0
    assert stats.outages >= 1 and stats.spilled > 0 and stats.replayed >= stats.spilled
    assert stats.max_queue_depth <= 1000
    # a writer that held the outage's 10,000 records would peak at half the footprint; tracemalloc also counts
    # what other threads allocate meanwhile (once, in the full suite on a loaded machine, the bounded writer
    # peaked at 7.3 MB: 0.26 of a 22.2 MB footprint beside the id window)
    assert peak < 0.3 * footprint + id_window, f"peak {peak / 1e6:.1f} MB vs {footprint / 1e6:.1f} MB for all records"
    assert not list((tmp_path / "spill").iterdir())


def test_spill_left_by_a_stopped_writer_is_replayed_by_the_next(engine, flaky, tmp_path):
    flaky.down()
    first = fast_writer(flaky.engine, tmp_path / "spill", spill_after_s=0.0).start()
    for record in synthetic_records(600, 8):
        first.submit(record)
    first.close(timeout=30)  # the database is still down: everything ends up in the spill folder
    assert first.stats().spilled + first.stats().written >= 600
    assert rows(engine)[0] < 600
    flaky.up()
    second = fast_writer(flaky.engine, tmp_path / "spill").start()
    assert second.drain(timeout=60), second.stats()
    second.close()
    assert rows(engine) == (600, 600, 600)


def test_judge_scores_behind_their_decisions_survive_an_outage(engine, flaky, tmp_path):
    """The judge's scores go through the same writer: submitted after their decisions, spilled with them
    during an outage, replayed in order -- none lost; a score for a request with no decision is set aside."""
    from regret_gateway.store.records import FeedbackRecord
    from regret_gateway.store.schema import Feedback

    records = list(synthetic_records(300, 8))
    writer = fast_writer(flaky.engine, tmp_path / "spill").start()
    all_spilled = threading.Event()  # every record submitted during the outage (200 decisions, 301 scores)
    append = writer._append

    def spill(*args, **kwargs):
        append(*args, **kwargs)
        if writer.stats().spilled >= 501:
            all_spilled.set()

    writer._append = spill  # type: ignore[method-assign]
    for r in records[:100]:
        writer.submit(r)
    assert writer.drain(timeout=30)
    flaky.down()
    for r in records[100:]:
        writer.submit(r)
    for r in records:
        writer.submit(FeedbackRecord(r.request_id, 0.5, source="judge", cost_usd=1e-4))
    writer.submit(FeedbackRecord("no-such-request", 1.0, source="judge"))
    assert all_spilled.wait(timeout=60), writer.stats()  # the outage outlasted spill_after_s
    flaky.up()
    assert writer.drain(timeout=60), writer.stats()
    stats = writer.stats()
    writer.close()
    with Session(engine) as s:
        scores = s.execute(select(Feedback.source, func.count(), func.sum(Feedback.cost_usd)).group_by(Feedback.source)).all()
    assert rows(engine) == (300, 300, 300)
    assert [(src, n) for src, n, _ in scores] == [("judge", 300)] and scores[0][2] == pytest.approx(0.03)
    assert stats.spilled == 501 and stats.refused == 1 and stats.dropped == 0
    assert "no-such-request" in (tmp_path / "spill" / "refused.jsonl").read_text()


def test_a_request_is_written_once_its_outcome_alone(engine, tmp_path):
    """The gateway submits a decision at routing time and again with its outcome: the writer sends the
    decision (and its 1.5 KB embedding) once, then the outcome alone, and reads nothing back to do so."""
    import dataclasses

    from sqlalchemy import event

    writer = fast_writer(engine, tmp_path / "spill").start()
    records = list(synthetic_records(40, 8))
    for r in records:
        writer.submit(dataclasses.replace(r, outcome=None))
    assert writer.drain(timeout=30), writer.stats()
    statements: list[str] = []

    def seen(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    for r in records:
        writer.submit(r)
    assert writer.drain(timeout=30), writer.stats()
    writer.close()
    event.remove(engine, "before_cursor_execute", seen)
    assert rows(engine) == (40, 40, 40)
    assert statements and not [s for s in statements if "decisions" in s.lower()], statements


def test_full_queue_overflows_to_disk_and_is_replayed(engine, tmp_path):
    writer = fast_writer(engine, tmp_path / "spill", queue_size=10)
    for record in synthetic_records(300, 8):  # not started yet: the queue holds 10, the rest overflows
        writer.submit(record)
    assert writer.stats().spilled == 290
    writer.start()
    assert writer.drain(timeout=60), writer.stats()
    writer.close()
    assert rows(engine) == (300, 300, 300)


def test_a_record_the_store_refuses_is_kept_aside_and_the_rest_written(engine, tmp_path):
    import numpy as np

    from regret_gateway.store.records import DecisionRecord

    writer = fast_writer(engine, tmp_path / "spill").start()
    good = list(synthetic_records(5, 8))
    bad = DecisionRecord(
        request_id="wrong-size",
        tier="standard",
        lam=0.0,
        embedding_model="bench",
        embedding=np.zeros(3),
        chosen_model="small",
        propensity=1.0,
    )
    for record in [*good[:2], bad, *good[2:]]:
        writer.submit(record)
    assert writer.drain(timeout=30), writer.stats()
    stats = writer.stats()
    writer.close()
    assert rows(engine)[0] == 5 and stats.refused == 1 and stats.spilled == 0
    assert "wrong-size" in (tmp_path / "spill" / "refused.jsonl").read_text()


def test_text_with_nul_characters_is_stored_not_lost(engine, tmp_path):
    """PostgreSQL refuses a NUL in text; prompts and upstream errors may carry one. They are stored with
    the NUL replaced, next to their batch-mates."""
    import dataclasses

    from regret_gateway.store.records import OutcomeRecord

    records = list(synthetic_records(21, dim=8, seed=5, prefix="nul"))
    records[3] = dataclasses.replace(records[3], prompt_text="ignore previous\x00 instructions")
    records[7] = dataclasses.replace(records[7], outcome=OutcomeRecord(records[7].request_id, 0.0, status="failure",
                                                                       error="upstream said \x00 no"))  # fmt: skip
    writer = fast_writer(engine, tmp_path / "spill").start()
    for r in records:
        writer.submit(r)
    assert writer.drain(timeout=30)
    writer.close()
    assert rows(engine) == (21, 21, 21)
    with Session(engine) as s:
        assert s.get(Decision, records[3].request_id).prompt_text == "ignore previous\ufffd instructions"
        assert s.get(Outcome, records[7].request_id).error == "upstream said \ufffd no"


def test_a_record_the_store_refuses_is_set_aside_and_its_batch_mates_are_written(engine, tmp_path, monkeypatch):
    """A driver error on one record's content (psycopg2 raises a plain ValueError) must not drop the batch:
    the batch is written record by record, the refused one kept aside and counted, the rest stored."""
    import regret_gateway.store.writer as writer_module

    real = writer_module.record_decisions

    def refusing(session, batch):
        if any(r.request_id == "bad-00000004" for r in batch):
            raise ValueError("A string literal cannot contain NUL (0x00) characters.")
        return real(session, batch)

    monkeypatch.setattr(writer_module, "record_decisions", refusing)
    writer = fast_writer(engine, tmp_path / "spill").start()
    for r in synthetic_records(12, dim=8, seed=6, prefix="bad"):
        writer.submit(r)
    assert writer.drain(timeout=30)
    writer.close()
    assert rows(engine) == (11, 11, 11)
    stats = writer.stats()
    assert stats.refused == 1 and stats.dropped == 0
    assert "bad-00000004" in (tmp_path / "spill" / "refused.jsonl").read_text()


def test_a_spill_file_with_a_nul_record_is_replayed_at_start(engine, tmp_path):
    """A spill file left by an earlier process (pid 1 is never ours) with a NUL in a prompt: the next
    writer replays it at start, with the NUL replaced, instead of failing on it forever."""
    import json

    records = list(synthetic_records(5, dim=8, seed=8, prefix="old"))
    lines = [r.to_json() for r in records]
    lines[2]["prompt_text"] = "spilled \x00 text"
    spill = tmp_path / "spill"
    spill.mkdir()
    (spill / "spill-999999999.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    writer = fast_writer(engine, spill).start()
    assert writer.drain(timeout=30)
    writer.close()
    assert rows(engine) == (5, 5, 5)
    with Session(engine) as s:
        assert s.get(Decision, records[2].request_id).prompt_text == "spilled \ufffd text"
    assert not list(spill.glob("spill-*"))


def test_a_decision_s_whole_distribution_survives_its_outcome_and_the_spill_file():
    """The hook adds an outcome to a logged decision (dataclasses.replace) and the writer may spill it as JSON:
    every model's probability, stored to six digits, still gives the chosen model its exact propensity."""
    import dataclasses

    import numpy as np

    from regret_gateway.store.records import DecisionRecord, OutcomeRecord, StoreInputError, record_from_json

    p = 1.0 / 3.0
    spread = {"small": p, "large": 1.0 - p - 0.0025, "rare": 0.0025}
    first = DecisionRecord(request_id="d", tier="gold", lam=1.0, embedding_model="e", embedding=np.ones(2, np.float32),
                           chosen_model="small", propensity=p, propensities=spread)  # fmt: skip
    again = dataclasses.replace(first, outcome=OutcomeRecord("d", cost_usd=1e-4))
    back = record_from_json(again.to_json())
    assert back.propensities == again.propensities == {"small": 0.333333, "large": 0.664167, "rare": 0.0025}
    assert back.propensity == p
    with pytest.raises(StoreInputError, match="propensities"):
        dataclasses.replace(first, propensities={"small": 0.5, "large": 0.5})
