import csv
import gzip
import json
import math

import numpy as np
import pytest

from regret_gateway.evaluation.loaders import (
    SPROUT_PRICES,
    detect_format,
    hash_split,
    load_benchmark,
    load_routerbench,
    load_sprout,
)
from tests.conftest import SHARED_ROUTERBENCH

MODELS = ["m-small", "m-large"]


def write_routerbench(path, rows):
    cols = ["sample_id", "prompt", "eval_name", *MODELS, *(m + "|total_cost" for m in MODELS), "oracle_model_to_route_to"]
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def rb_row(i, q_small=1.0, q_large=1.0, c_small=0.0001, c_large="0.002"):
    return {
        "sample_id": f"task.{i}",
        "prompt": repr([f"question {i}", "follow-up"]),
        "eval_name": "task",
        "m-small": q_small,
        "m-large": q_large,
        "m-small|total_cost": c_small,
        "m-large|total_cost": c_large,
        "oracle_model_to_route_to": "m-small",
    }


def test_routerbench_folder_split_from_file_names_and_nan_rows_dropped(tmp_path):
    write_routerbench(tmp_path / "task_train.csv.gz", [rb_row(i) for i in range(6)] + [rb_row(99, q_large="")])
    write_routerbench(tmp_path / "task_test.csv", [rb_row(i, q_small=0.0) for i in range(10, 13)])
    bench = load_routerbench(tmp_path)
    assert bench.model_names == ("m-small", "m-large")
    assert bench.n_samples == 9
    assert bench.dropped == {"missing quality or cost": 1}
    assert (bench.split == "train").sum() == 6 and (bench.split == "test").sum() == 3
    first = bench.sample_ids.index("task.0")
    assert bench.prompts[first] == "question 0\nfollow-up"
    assert bench.cost[first].tolist() == [0.0001, 0.002]
    assert detect_format(tmp_path) == "routerbench"


def test_single_file_gets_a_deterministic_prompt_level_split(tmp_path):
    write_routerbench(tmp_path / "anything.csv", [rb_row(i) for i in range(200)] + [rb_row(5)])
    bench = load_benchmark(tmp_path / "anything.csv")
    splits = dict(zip(bench.prompts, bench.split))
    assert set(bench.split) == {"train", "val", "test"}
    assert 0.6 < np.mean(bench.split == "train") < 0.95
    assert all(splits[p] == hash_split(p) for p in bench.prompts)  # duplicates land together
    sub = load_benchmark(tmp_path / "anything.csv", limit=50, seed=3)
    assert sub.n_samples == 50 and sub.prompts == load_benchmark(tmp_path / "anything.csv", limit=50, seed=3).prompts


def test_routerbench_pickle_as_published(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([rb_row(i) for i in range(5)])
    frame.to_pickle(tmp_path / "routerbench_0shot.pkl")
    bench = load_benchmark(tmp_path / "routerbench_0shot.pkl")
    assert bench.n_samples == 5 and bench.model_names == ("m-small", "m-large")


def test_sprout_layout_costs_from_tokens_and_prices(tmp_path):
    m1, m2 = "openai-gpt-4o", "openai-gpt-4o-mini"
    rows = [
        {
            "prompt": f"p{i}",
            "dataset": "gsm8k",
            m1: {"score": 1.0, "num_input_tokens": 100, "num_output_tokens": 50, "response": "x"},
            m2: {"score": 0.0, "num_input_tokens": 100, "num_output_tokens": 10, "response": "y"},
        }
        for i in range(4)
    ]
    rows.append(
        {
            "prompt": "bad",
            m1: {"score": None, "num_input_tokens": 1, "num_output_tokens": 1},
            m2: {"score": 1, "num_input_tokens": 1, "num_output_tokens": 1},
        }
    )
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows[:3] + rows[4:]))
    (tmp_path / "test.jsonl").write_text(json.dumps(rows[3]))
    assert detect_format(tmp_path) == "sprout"
    bench = load_sprout(tmp_path)
    assert bench.model_names == (m1, m2) and bench.n_samples == 4
    assert bench.dropped == {"missing or invalid score/tokens": 1}
    expected = (100 * SPROUT_PRICES[m1][0] + 50 * SPROUT_PRICES[m1][1]) / 1e6
    assert math.isclose(bench.cost[0, 0], expected)
    assert sorted(bench.split) == ["test", "train", "train", "train"]
    with pytest.raises(ValueError, match="no price for models"):
        load_sprout(tmp_path, prices={m1: (1.0, 1.0)})


def test_bad_paths_and_layouts(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_benchmark(tmp_path / "missing.csv")
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="neither RouterBench"):
        load_benchmark(tmp_path / "x.csv")
    with pytest.raises(ValueError, match="not in RouterBench's layout"):
        load_routerbench(tmp_path / "x.csv")


@pytest.mark.skipif(not SHARED_ROUTERBENCH.exists(), reason="shared RouterBench subset not present")
def test_shared_routerbench_subset():
    bench = load_benchmark(SHARED_ROUTERBENCH)
    assert len(bench.model_names) == 11
    assert bench.n_samples == 3150  # 3,178 rows less 28 with a missing model outcome
    assert bench.dropped == {"missing quality or cost": 28}
    assert set(bench.split) == {"train", "test"}
    assert (bench.split == "test").sum() == 945 and (bench.split == "train").sum() == 2205
