"""The `bench` commands' wiring: `bench offline` on a tiny RouterBench-layout file (two methods, one trial), `bench gateway`, `bench routing`, `bench retrain`."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from regret_gateway.cli import app
from tests.evaluation.test_loaders import rb_row, write_routerbench

runner = CliRunner()


def _tiny_benchmark(folder):
    """A RouterBench-layout train/test pair: the small model solves the code prompts only, the large one most."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(160):
        code = i % 2 == 0
        rows.append(rb_row(i, q_small=float(code and rng.random() < 0.9), q_large=float(rng.random() < 0.9)))
        rows[-1]["prompt"] = repr([("Write a Python function number " if code else "Explain the history of ") + str(i)])
    write_routerbench(folder / "tiny_train.csv", rows[:120])
    write_routerbench(folder / "tiny_test.csv", rows[120:])


def test_bench_offline_wiring(tmp_path):
    _tiny_benchmark(tmp_path)
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "bench",
            "offline",
            "--data",
            str(tmp_path),
            "--out",
            str(out),
            "--trials",
            "1",
            "--lambdas",
            "0,100,200",
            "--methods",
            "r-and-c,rm-softmax",
            "--outcome-preset",
            "fast",
            "--served-one-fit",
            "--log-draws",
            "2",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    assert set(doc) >= {"dataset", "config", "methods"}
    # what a run used is recorded
    assert doc["config"]["train_preset"] == "fast" and doc["config"]["outcome_preset"] == "fast"
    assert set(doc["methods"]) == {"rm-softmax", "r-and-c", "served", "single-best", "oracle", "logged-constant"}
    # each training prompt logged twice (--log-draws 2), the test prompts never
    assert doc["dataset"]["log_draws"] == 2 and doc["config"]["log_draws"] == 2
    assert doc["dataset"]["logged_rows"] == 2 * (doc["dataset"]["n_train"] + doc["dataset"]["n_val"])
    m = doc["methods"]["rm-softmax"]
    assert m["lambdas"] == [0.0, 100.0, 200.0] and len(m["utility_mean"]) == 3 and len(m["utility_std"]) == 3
    assert set(m) >= {"accuracy_mean", "cost_mean", "auc"}
    oracle = doc["methods"]["oracle"]["utility_mean"]
    assert all(u <= o + 1e-9 for name, mm in doc["methods"].items() for u, o in zip(mm["utility_mean"], oracle))
    assert (out / "utility.md").read_text().startswith("Test utility x100")
    assert (out / "accuracy_cost.png").stat().st_size > 10_000
    # why served differs from the single best model: how often a learned router won the gate, and how often
    # the fixed choice estimated from the logs is the model full feedback picks
    assert 0.0 <= doc["diagnostics"]["served_learned_share"] <= 1.0
    assert "served_constant_is_single_best_share" in doc["diagnostics"]


@pytest.mark.slow
def test_bench_backends_routes_the_same_with_torch_and_onnx(tmp_path):
    _tiny_benchmark(tmp_path)
    result = runner.invoke(app, ["bench", "backends", "--data", str(tmp_path), "--lambdas", "0,100"])
    assert result.exit_code == 0, result.output
    assert "cosine torch vs onnx: min 0.9999" in result.output or "cosine torch vs onnx: min 1.0000" in result.output
    assert "| 0 | 0 (0.00%) |" in result.output and "| 100 | 0 (0.00%) |" in result.output


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bench_gateway_prints_torch_and_onnx_hook_rows_side_by_side():
    args = ["bench", "gateway", "--requests", "10", "--concurrency", "1", "--prompts", "short", "--repeats", "2", "--budget", "5"]
    backends = "torch,torch-eager,onnx,onnx-plain"
    result = runner.invoke(app, [*args, "--threads", "1", "--layers", "2", "--backends", backends])
    assert result.exit_code == 0, result.output
    assert "| added p99 ms |" in result.output and "| routed | read short | shed | timed out |" in result.output
    for backend, key in (
        ("torch, traced on cpu", "torch"),
        ("torch, eager on cpu", "torch-eager"),
        ("onnx, fused graph, 1 thread on cpu", "onnx-1"),
        ("onnx, fused graph, 2 layers on cpu", "onnx-L2"),
        ("onnx, plain graph on cpu", "onnx-plain"),
    ):
        assert f"| short | regret-gateway hook | {backend} | 1 | 20 |" in result.output, result.output
        # 20 warm-up requests at start, 2 at the cell's concurrency, 2 x 10 timed; plain rows are not routed
        assert f"hook ({key}): routed=42 fallback=0" in result.output
    for plain in ("plain LiteLLM, one model", "plain LiteLLM, the hook's models"):
        assert result.output.count(f"| short | {plain} | - | 1 | 20 |") == 5  # beside each hook
    bad = runner.invoke(app, ["bench", "gateway", "--backends", "tensorrt"])
    assert bad.exit_code == 2 and "unknown --backends/--prompts values: ['tensorrt']" in bad.output
    bad = runner.invoke(app, ["bench", "gateway", "--threads", "-1"])
    assert bad.exit_code == 2 and "--threads must be whole numbers >= 0" in bad.output
    bad = runner.invoke(app, ["bench", "gateway", "--layers", "2", "--backends", "torch"])
    assert bad.exit_code == 2 and "add onnx to --backends" in bad.output


def test_the_gateway_bench_compares_the_gpu_with_the_cpu_encoders_it_replaces():
    from regret_gateway.bench.hook_latency import variants

    on_gpu = variants(("torch", "onnx"), "cuda", threads=(1, 2))
    assert on_gpu == {
        "torch-cpu": {"backend": "torch", "device": "cpu", "threads": None},
        "torch-cuda": {"backend": "torch", "device": "cuda", "threads": None},
        "onnx-1": {"backend": "onnx", "device": "cpu", "threads": 1},
        "onnx-2": {"backend": "onnx", "device": "cpu", "threads": 2},
    }
    assert variants(("onnx",), "cpu", threads=(0, 1)) == {  # 0: ONNX Runtime's default beside one thread
        "onnx": {"backend": "onnx", "device": "cpu", "threads": None},
        "onnx-1": {"backend": "onnx", "device": "cpu", "threads": 1},
    }
    assert variants(("onnx",), "cpu", layers=(3,)) == {
        "onnx": {"backend": "onnx", "device": "cpu", "threads": None},
        "onnx-L3": {"backend": "onnx", "device": "cpu", "threads": None, "layers": 3},
    }
    assert variants(("onnx-plain",), "cpu") == {
        "onnx-plain": {"backend": "onnx", "device": "cpu", "threads": None, "fuse": False}
    }
    assert variants(("torch", "torch-eager"), "cuda") == {  # torch traced (the default) beside torch eager
        "torch-cpu": {"backend": "torch", "device": "cpu", "threads": None},
        "torch-cuda": {"backend": "torch", "device": "cuda", "threads": None},
        "torch-eager-cuda": {"backend": "torch", "device": "cuda", "threads": None, "trace": False},
    }
    assert variants(("static", "onnx"), "cpu")["static"] == {"kind": "static", "device": "cpu", "threads": None}
    assert variants(("torch", "onnx"), "cpu") == {
        "torch": {"backend": "torch", "device": "cpu", "threads": None},
        "onnx": {"backend": "onnx", "device": "cpu", "threads": None},
    }


def test_pooled_bench_rows_weigh_every_request_and_every_second():
    from regret_gateway.bench.hook_latency import Load, pool

    row = pool([Load(np.array([10.0, 20.0, 30.0]), 1.0, [], 0.3), Load(np.array([40.0]), 3.0, [], 0.1)])
    assert row.requests == 4 and row.p50_ms == 25.0 and row.rps == 1.0  # 4 requests in 4 seconds
    assert row.cpu_ms == pytest.approx(100.0)  # 0.4 CPU seconds over 4 requests


def test_at_concurrency_one_the_hook_and_the_plain_targets_take_turns_every_few_requests(monkeypatch):
    """So that a drift of the machine's speed within a repeat falls on all three alike."""
    import asyncio

    from regret_gateway.bench.hook_latency import MASTER_KEY, MODELS, _turns
    from regret_gateway.bench.local import LocalServer, free_port, mock_upstream

    seen: list[tuple[str, str]] = []

    def respond(model: str, text: str) -> tuple[str, int, int]:
        seen.append((model, text))
        return "ok", 1, 1

    monkeypatch.setenv("LITELLM_MASTER_KEY", MASTER_KEY)
    port = free_port()
    with LocalServer(mock_upstream(respond), port):
        hook, matched, single = asyncio.run(_turns(port, [f"p{i}" for i in range(5)], turn=2))
    # no LiteLLM here: the "hook's models" are the virtual name it was sent, as served
    assert seen[:6] == [("regret-router", "p0"), ("regret-router", "p1")] * 2 + [(MODELS[0], "p0"), (MODELS[0], "p1")]
    assert [t for _, t in seen[6:]] == ["p2", "p3"] * 3 + ["p4"] * 3
    assert all(len(load.latencies_ms) == 5 and len(load.served) == 5 and load.seconds > 0 for load in (hook, matched, single))


def test_bench_offline_clear_errors(tmp_path):
    result = runner.invoke(app, ["bench", "offline", "--data", str(tmp_path / "none.csv"), "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not found" in result.output
    write_routerbench(tmp_path / "t_train.csv", [rb_row(i) for i in range(5)])
    result = runner.invoke(
        app,
        ["bench", "offline", "--data", str(tmp_path / "t_train.csv"), "--out", str(tmp_path), "--methods", "rm-softmax,bogus"],
    )
    assert result.exit_code == 2 and "unknown methods ['bogus']" in result.output
    result = runner.invoke(
        app, ["bench", "offline", "--data", str(tmp_path / "t_train.csv"), "--out", str(tmp_path), "--outcome-preset", "slow"]
    )
    assert result.exit_code == 2 and "unknown training preset 'slow'" in result.output
    result = runner.invoke(
        app, ["bench", "offline", "--data", str(tmp_path / "t_train.csv"), "--out", str(tmp_path), "--context", "{prompt}"]
    )
    assert result.exit_code == 2 and "must name one or more of" in result.output


def test_bench_routing_times_each_step():
    result = runner.invoke(app, ["bench", "routing", "--calls", "100", "--dim", "16"])
    assert result.exit_code == 0, result.output
    for step in ("choose, one request (igw)", "policy forward, batch 1024", "log a decision (record + queue)"):
        assert f"| {step} |" in result.output, result.output


def test_bench_retrain_times_cross_fitted_and_one_fit_side_by_side():
    """Each size is retrained both ways on the same logged rows, and the table says how many times one
    fit's time the default (cross-fitted) retrain took, the rows fitted and the peak memory. (retrain
    itself is timed by a stand-in here: the real pipeline is tested in tests/retrain/test_pipeline.py.)"""
    from regret_gateway.bench.retrain_timing import retrain_table, time_retrain
    from regret_gateway.store.engine import make_engine

    calls = []

    def timed(settings, opts):
        engine = make_engine(settings.store.url)
        with engine.connect() as conn:
            n = conn.exec_driver_sql("SELECT COUNT(*) FROM decisions").scalar()
        engine.dispose()
        calls.append((settings.store.url, n, opts.cross_fit, opts.precision))
        fit = (5.0 if opts.cross_fit else 1.0) * (2 if opts.precision == "float32" else 1)
        return "published", "", {"read": 0.5, "fit": fit, "evaluate": 0.5, "total": fit + 1}, n, 100.0

    table = retrain_table(time_retrain([300], dim=8, echo=lambda _: None, run=timed, precisions=("float32", "auto")))
    assert [(n, cf, p) for _, n, cf, p in calls] == [(300, True, "float32"), (300, False, "float32"), (300, True, "auto"),
                                                     (300, False, "auto")]  # fmt: skip
    assert len({url for url, *_ in calls}) == 1  # the same logs each time
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| 300 |")]
    assert [(r[2], r[3]) for r in rows] == [("cross-fitted", "float32"), ("one fit", "float32"), ("cross-fitted", "auto"),
                                            ("one fit", "auto")], table  # fmt: skip
    assert [r[8] for r in rows] == ["100"] * 4, table
    assert [r[-2] for r in rows] == ["1.00", "0.27", "0.55", "0.18"], table  # against the first row
    assert [r[-1].rstrip(" |") for r in rows] == ["3.67", "1.00", "3.00", "1.00"], table  # against one fit, same precision


def test_bench_offline_of_full_information_references_alone_reads_no_logs(tmp_path, monkeypatch):
    """Full-information references train on the true outcomes: such a run fits no nuisance stage (the
    logs' outcome models are the slow part), and --max-length sets how many tokens the router reads."""
    from regret_gateway.causal.estimators import Nuisance

    def no_nuisance(*args, **kwargs):
        raise AssertionError("a nuisance stage was fitted for a full-information run")

    monkeypatch.setattr(Nuisance, "fit", no_nuisance)
    _tiny_benchmark(tmp_path)
    out = tmp_path / "out"

    def args(max_length: int) -> list[str]:
        return ["bench", "offline", "--data", str(tmp_path), "--out", str(out), "--trials", "1", "--lambdas", "0,100",
                "--methods", "full-info-regression", "--max-length", str(max_length), "--cache-dir", str(tmp_path / "cache"),
                "--device", "cpu"]  # fmt: skip

    result = runner.invoke(app, args(16))
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text())
    assert set(doc["methods"]) == {"full-info-regression", "single-best", "oracle"} and not doc["diagnostics"]
    assert len(list((tmp_path / "cache").iterdir())) == 1
    assert runner.invoke(app, args(64)).exit_code == 0
    assert len(list((tmp_path / "cache").iterdir())) == 2  # another token limit is another embedding


def test_bench_offline_help_names_every_method_of_the_registry_and_imports_no_torch():
    """`bench offline --help` lists the registry's names (read from it, not a copy), and listing them imports
    neither torch nor any router class."""
    import subprocess
    import sys

    from regret_gateway.policy.registry import method_names

    code = (
        "import sys; from typer.testing import CliRunner; from regret_gateway.cli import app; "
        "r = CliRunner().invoke(app, ['bench', 'offline', '--help'], env={'COLUMNS': '400'}); "
        "print(r.output); print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("NO-TORCH")
    listed = " ".join(out.split())
    assert all(name in listed for name in method_names())


def test_bench_report_times_the_savings_report_on_stores_of_each_size_side_by_side():
    """`bench report`: a store per size, one report on each in a fresh process; the table has a row per size
    with its seconds, peak memory and the ratios to the smallest, and every simulated team and tier reported."""
    result = runner.invoke(app, ["bench", "report", "--sizes", "400,800"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 4") or line.startswith("| 8")]
    assert [r.split("|")[1].strip() for r in rows] == ["400", "800"], result.stdout
    cells = [[c.strip().replace(",", "") for c in r.split("|")[1:-1]] for r in rows]
    assert all(float(c[1]) > 0 and float(c[2]) >= float(c[3]) > 0 and c[4] == "12" for c in cells), cells
    assert cells[0][5] == "1.00" and cells[1][6] == "2.0"


def test_bench_window_reads_the_same_training_set_from_the_store_and_its_day_parts(tmp_path):
    """`bench window`: per store, the export and both readers in fresh processes; both read the same training
    set, and the parts hold an embedding only for a scored decision (fewer bytes a decision than the store); the
    store shrinks by about an embedding an unscored decision once their embeddings are dropped."""
    pytest.importorskip("duckdb")
    result = runner.invoke(app, ["bench", "window", "--runs", "3000:0.1,3000:0.3", "--workdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = [[c.strip().replace(",", "") for c in line.split("|")[1:-1]] for line in result.stdout.splitlines()
            if line.startswith("| 3")]  # fmt: skip
    assert len(rows) == 2 and all(r[-1] == "yes" for r in rows), result.stdout
    (n1, scored1, store1, dropped1, steady1, parts1), (n2, scored2, store2, dropped2, steady2, parts2) = [
        (int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), r[6]) for r in rows
    ]
    assert n1 == n2 == 3000 and 200 < scored1 < 400 < 800 < scored2 < 1000, rows
    total = [int(p.split()[0]) for p in (parts1, parts2)]
    assert total[0] < total[1] < store1, rows  # more scored: more embeddings exported; still far below the store
    # the unscored embeddings dropped: the store keeps about an embedding (1,536 B) a scored decision
    assert dropped1 < steady1 < store1 and dropped1 < dropped2 < store2, rows
    assert store1 - dropped1 > 0.8 * 1536 * (3000 - scored1) / 3000, rows
    assert not list(tmp_path.iterdir())  # each store and its parts are removed after its run
    bad = runner.invoke(app, ["bench", "window", "--runs", "3000:2"])
    assert bad.exit_code == 2 and "a share in (0, 1]" in bad.output
