"""The closed loop end to end on a small slice of the shared RouterBench sample (what CI runs): every
request answered through the proxy, feedback stored, retrain between rounds, table and plot written."""

import json

import pytest

from regret_gateway.bench.closed_loop import BASELINES, DemoConfig, run_demo
from tests.conftest import SHARED_ROUTERBENCH


@pytest.mark.timeout(900)
def test_demo_closed_loop_on_the_shared_sample(tmp_path):
    if not SHARED_ROUTERBENCH.exists():
        pytest.skip("../shared/data/routerbench is not next to the checkout")
    lines = []
    doc = run_demo(
        DemoConfig(data=SHARED_ROUTERBENCH, limit=300, rounds=2, requests=70, out=tmp_path, device="cpu", concurrency=4),
        echo=lines.append,
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
    assert hook["routed"] == 2 * 3 * 70 and hook["fallback"] <= 5 and hook["writer_dropped"] == 0
    assert any("retrain after round 0" in line for line in lines)
    assert (tmp_path / "closed_loop.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "closed_loop.json").read_text())
    assert len(saved["rounds"]) == 6
