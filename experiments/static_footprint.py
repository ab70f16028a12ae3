"""The gateway-only install (no torch) serving each published encoder, side by side in one run: the time to
import the hook and route the first request (the encoder loaded), the peak RSS, whether ONNX Runtime was
loaded; and the install's size with and without ONNX Runtime (what only the ONNX encoder needs).

    python experiments/static_footprint.py CORE_PYTHON --size     # the install's size, before and
    python experiments/static_footprint.py CORE_PYTHON [--repeats N]   # after `pip install onnxruntime`

CORE_PYTHON: the interpreter of a venv with `pip install regret-gateway` (no extras) and, for the ONNX row,
`pip install 'regret-gateway[onnx]'` (ONNX Runtime) in the same venv. Run with the project's own venv
(torch installed: it publishes both encoders and a router for each).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = r"""
import asyncio, json, sys, time
def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
t0 = time.perf_counter()
from regret_gateway.gateway.hook import RegretRouterHook
from regret_gateway.gateway.runtime import Gateway
from regret_gateway.config import Settings
import_s = time.perf_counter() - t0
gateway = Gateway(Settings.model_validate_json(sys.argv[1]), seed=0).start()
hook = RegretRouterHook(gateway)
class Key:
    team_id = None
    team_metadata = None
async def main():
    data = {"model": "regret-router", "messages": [{"role": "user", "content": "Write a haiku about routers"}]}
    data = await hook.async_pre_call_hook(Key(), None, data, "completion")
    return data["metadata"]["regret_gateway"]["mode"]
mode = asyncio.run(main())
first_s = time.perf_counter() - t0
gateway.close()
print(json.dumps({"import_s": import_s, "first_s": first_s, "mode": mode, "rss_mb": hwm(), "backend": gateway.embedding_label,
                  "onnxruntime": "onnxruntime" in sys.modules, "torch": "torch" in sys.modules}))
"""

SIZE = r"""
import json
from importlib import metadata
def size(dist):
    return sum(f.locate().stat().st_size for f in (dist.files or []) if f.locate().exists())
print(json.dumps({"total_mb": sum(size(d) for d in metadata.distributions()) / 1e6}))
"""


def publish(root: Path, kind: str) -> str:
    """A published encoder of ``kind`` and a random router for its embedding under ``root``; the settings."""
    import torch

    from regret_gateway.artifacts import activate, save_artifact
    from regret_gateway.config import Settings
    from regret_gateway.encoders.embedder import Embedder
    from regret_gateway.encoders.publish import publish_encoder
    from regret_gateway.nn.networks import IntervalNets, StackedMLP
    from regret_gateway.servable import Candidate, IntervalArrays, MLPArrays, OutcomePolicy, PerTierPolicy, RMIntervalPolicy

    models, lams = ("a", "b", "c"), [0.0, 200.0, 1000.0]
    base = {"models": list(models), "default_tier": "t", "tiers": {"t": {"lam": 200.0, "epsilon": 0.0}},
            "artifacts_dir": str(root / "artifacts"), "store": {"url": f"sqlite:///{root}/gw.db", "spill_dir": str(root / "spill")}}  # fmt: skip
    settings = Settings.model_validate({**base, "embedder": {"kind": kind, "device": "cpu", "onnx_cache": str(root / "cache")}})
    embedder = Embedder.from_settings(settings)
    publish_encoder(embedder, root / "encoder")
    dim = embedder.dimension
    torch.manual_seed(0)
    nets, intervals = MLPArrays.of(StackedMLP(3, dim, 3)), IntervalArrays.of(IntervalNets(2, 3))
    estimator = OutcomePolicy(models, MLPArrays.of(StackedMLP(3, dim, 2)), np.full(3, 1e-3))
    interval = RMIntervalPolicy(models, lams, nets, intervals)
    policy = PerTierPolicy(lams, [interval] * 3, [Candidate("rm-interval")] * 3, estimator=estimator)
    path = save_artifact(root / "artifacts", policy=policy, tiers={"t": 200.0},
                         embedder={"model": settings.embedder.model, "id": settings.embedder.embedding_id})  # fmt: skip
    activate(root / "artifacts", path.name)
    served = {"kind": kind, "device": "cpu", "exported": str(root / "encoder")}
    return json.dumps({**base, "embedder": served})


def main() -> None:
    core = sys.argv[1]
    if "--size" in sys.argv:
        print(subprocess.run([core, "-c", SIZE], capture_output=True, text=True, check=True).stdout.strip())
        return
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 5
    tmp = Path(tempfile.mkdtemp(prefix="static-footprint-"))
    rows = {}
    for kind, label in (("transformer", "published ONNX encoder (MiniLM)"), ("static", "published static encoder")):
        (tmp / kind).mkdir()
        rows[label] = publish(tmp / kind, kind)
    results: dict[str, list[dict]] = {label: [] for label in rows}
    for _ in range(repeats):  # interleaved: the machine's drift hits both alike
        for label, config in rows.items():
            out = subprocess.run([core, "-c", CHILD, config], capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"{label}: {out.stderr[-2000:]}")
            results[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    size = json.loads(subprocess.run([core, "-c", SIZE], capture_output=True, text=True, check=True).stdout)
    base = float(np.median([r["first_s"] - r["import_s"] for r in results[next(iter(rows))]]))
    print(
        f"the core venv's installed packages: {size['total_mb']:.0f} MB (run `--size` before `pip install onnxruntime` for the size without)"
    )
    print("| published encoder, core install | import the hook (s) | import + first routed request (s) | load the encoder + route (s) | vs ONNX | peak RSS (MB) | backend | ONNX Runtime loaded | torch loaded |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---|---|---|")
    for label, runs in results.items():
        first = float(np.median([r["first_s"] for r in runs]))
        load = float(np.median([r["first_s"] - r["import_s"] for r in runs]))
        print(f"| {label} | {np.median([r['import_s'] for r in runs]):.2f} | {first:.2f} | {load:.2f} | {load / base:.2f} | "
              f"{np.median([r['rss_mb'] for r in runs]):.0f} | {runs[0]['backend']} | {runs[0]['onnxruntime']} | {runs[0]['torch']} |")  # fmt: skip


if __name__ == "__main__":
    main()
