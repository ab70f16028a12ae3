"""`bench store`: writer processes started together, every row stored, the table rendered."""

from __future__ import annotations

from regret_gateway.bench.store import throughput_table, write_throughput


def test_writer_processes_write_every_row_and_the_table_says_so():
    one = write_throughput("sqlite", rows=300, dim=8, batch_size=50, writers=1)
    two = write_throughput("sqlite", rows=300, dim=8, batch_size=50, writers=2, rate=5000.0)
    assert (one.rows, two.rows) == (300, 600)
    assert two.writer.written == 600 and two.writer.new_rows == 600 and two.writer.dropped == 0
    table = throughput_table([one, two])
    assert "| sqlite | 2 | 5,000 | 600 |" in table and "as fast as taken" in table
