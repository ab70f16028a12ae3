"""The closed loop end to end on a small generated world: every request answered through the proxy,
feedback stored, retrain between rounds -- and the gateway learns: after one retrain its own (greedy)
choices beat uniform routing by a wide margin on the mean over tiers, and the plot and table are written."""

import json

import numpy as np
import pytest

from regret_gateway.bench.closed_loop import BASELINES, DemoConfig, run_demo


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_closed_loop_learns_from_its_own_logs(tmp_path):
    lines: list[str] = []
    doc = run_demo(
        DemoConfig(world_size=500, rounds=2, requests=80, out=tmp_path, device="cpu", concurrency=8), echo=lines.append
    )
    rounds = doc["rounds"]
    assert [(r["round"], r["tier"]) for r in rounds] == [
        (0, "premium"),
        (0, "standard"),
        (0, "economy"),
        (1, "premium"),
        (1, "standard"),
        (1, "economy"),
    ]
    assert all(set(r["utility"]) == set(BASELINES) for r in rounds)
    hook = doc["hook"]
    assert hook["routed"] == 2 * 3 * 80 and hook["fallback"] <= 5 and hook["writer_dropped"] == 0
    assert any("retrain after round 0: published" in line for line in lines), "\n".join(lines)
    last = [r for r in rounds if r["round"] == 1]
    greedy = np.mean([r["utility"]["gateway-greedy"] for r in last])
    uniform = np.mean([r["utility"]["uniform"] for r in last])
    cold = np.mean([r["utility"]["gateway"] for r in rounds if r["round"] == 0])
    # the uniform cold start is ~uniform; one retrain on ~240 logged rows must lift the router well above it
    assert greedy > uniform + 10 and greedy > cold + 10, "\n".join(lines)
    assert all(r["router_version"] and r["router_version"] != "None" for r in last)
    assert (tmp_path / "closed_loop.png").stat().st_size > 10_000
    assert len(json.loads((tmp_path / "closed_loop.json").read_text())["rounds"]) == 6


def test_a_file_with_train_rows_only_still_gets_a_traffic_split(tmp_path):
    """A file whose name says train has no test split: a seeded share of its prompts becomes the traffic,
    never the prompts the references were trained on (this used to crash after embedding everything)."""
    from regret_gateway.bench.closed_loop import _prepare
    from tests.evaluation.test_loaders import rb_row, write_routerbench

    rows = [rb_row(i, q_small=float(i % 2), q_large=1.0) for i in range(80)]
    for r in rows:
        r["prompt"] = f"Question number {r['sample_id']}: what is {r['sample_id']} plus one?"
    write_routerbench(tmp_path / "only_train.csv", rows)
    lines: list[str] = []
    world = _prepare(DemoConfig(data=tmp_path / "only_train.csv", device="cpu"), tmp_path, lines.append)
    assert len(set(world.traffic_ix.tolist())) == 20 and any("no test split" in line for line in lines)
    again = _prepare(DemoConfig(data=tmp_path / "only_train.csv", device="cpu"), tmp_path, lines.append)
    assert np.array_equal(world.traffic_ix, again.traffic_ix)  # seeded: the same traffic every run
