"""The gateway serves without torch or transformers: a router that retrain published (numpy and JSON) and a
published encoder -- the static one (numpy and tokenizers: not even ONNX Runtime is loaded) or the ONNX
graph (ONNX Runtime and tokenizers) -- route a request through the hook in a process where importing torch
or transformers fails."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from sqlalchemy.orm import Session

from regret_gateway.config import Settings, StoreSpec, TierSpec
from regret_gateway.encoders.embedder import Embedder
from regret_gateway.encoders.publish import publish_encoder
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.synthetic import write_world
from regret_gateway.retrain import RetrainOptions, retrain
from regret_gateway.store.engine import make_engine
from regret_gateway.store.migrate import upgrade
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.writes import record_decisions, record_feedback

SCRIPT = r"""
import asyncio, json, sys
for blocked in ("torch", "transformers"):
    sys.modules[blocked] = None  # importing it now raises ImportError
from regret_gateway.config import Settings
from regret_gateway.gateway.hook import RegretRouterHook
from regret_gateway.gateway.runtime import Gateway

gateway = Gateway(Settings.model_validate_json(sys.argv[1]), seed=0).start()
hook = RegretRouterHook(gateway)

class Key:
    team_id = None
    team_metadata = None

async def main():
    messages = [{"role": "user", "content": "Write a SQL query that joins orders and customers."}]
    data = await hook.async_pre_call_hook(Key(), None, {"model": "regret-router", "messages": messages}, "completion")
    gateway.writer.drain(timeout=10)
    return data["metadata"]["regret_gateway"]

decision = asyncio.run(main())
report = {"decision": decision, "backend": gateway.embedding_label, "error": gateway.embedder_error}
gateway.close()
print(json.dumps({**report, "modules": sorted(k for k, v in sys.modules.items() if v is not None)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["static", "transformer"])
def test_a_published_router_and_encoder_route_without_torch(tmp_path, kind):
    bench = load_benchmark(write_world(tmp_path / "world.csv", n=1200, seed=5))
    X = Embedder(device="cpu", kind=kind, progress=False).encode(list(bench.prompts))
    rng = np.random.default_rng(0)
    actions = rng.integers(bench.quality.shape[1], size=len(X))
    settings = Settings(
        models=bench.model_names,
        tiers={"standard": TierSpec(lam=200.0, epsilon=0.0)},
        default_tier="standard",
        embedder={"kind": kind},
        artifacts_dir=str(tmp_path / "artifacts"),
        store=StoreSpec(url=f"sqlite:///{tmp_path}/gw.db", spill_dir=str(tmp_path / "spill")),
    )
    upgrade(settings.store.url)
    engine = make_engine(settings.store.url)
    with Session(engine) as s, s.begin():
        record_decisions(s, [
            DecisionRecord(request_id=f"r{i}", tier="standard", lam=200.0, embedding_model=settings.embedder.embedding_id,
                           embedding=X[i], chosen_model=bench.model_names[a], propensity=1 / len(bench.model_names), team="t",
                           outcome=OutcomeRecord(f"r{i}", cost_usd=float(bench.cost[i, a])))
            for i, a in enumerate(actions)
        ])  # fmt: skip
        record_feedback(s, [FeedbackRecord(f"r{i}", float(bench.quality[i, a])) for i, a in enumerate(actions)])
    result = retrain(settings, engine, RetrainOptions(n_boot=50, cross_fit=False, force=True))
    engine.dispose()
    assert result.status == "published", result.reason

    meta = publish_encoder(Embedder.from_settings(settings), tmp_path / "encoder")
    assert meta["model"] == settings.embedder.model and meta["dim"] == X.shape[1]
    served = settings.model_copy(
        update={"embedder": settings.embedder.model_copy(update={"exported": str(tmp_path / "encoder")})}
    )
    run = subprocess.run([sys.executable, "-c", SCRIPT, served.model_dump_json()], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["error"] is None and out["decision"]["mode"] == "policy", out
    assert out["decision"]["router_version"] == result.version
    loaded = [m for m in out["modules"] if m.split(".")[0] in ("torch", "transformers", "xgboost")]
    loaded += [m for m in out["modules"] if m.startswith(("regret_gateway.causal", "regret_gateway.policy", "regret_gateway.nn"))]
    assert not loaded, f"the serving path loaded: {loaded[:20]}"
    assert out["backend"].startswith("static" if kind == "static" else "onnx"), out["backend"]
    if kind == "static":  # a lookup and a mean: no ONNX Runtime either
        assert not [m for m in out["modules"] if m.split(".")[0] == "onnxruntime"]
