"""An import LiteLLM's proxy retries on every request, made to fail once (gateway/litellm_imports.py)."""

import importlib
import subprocess
import sys

import pytest

from regret_gateway.gateway import litellm_imports


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A folder on sys.path with ``runs`` (counts its executions) and ``missing_dep`` (runs, then imports a
    package that is not installed), as LiteLLM's OpenTelemetry logger does without opentelemetry-sdk."""
    (tmp_path / "runs.py").write_text("n = 0\n")
    (tmp_path / "missing_dep.py").write_text("import runs\nruns.n += 1\nimport no_such_package_here\n")
    (tmp_path / "fine_dep.py").write_text("import runs\nruns.n += 10\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("runs", "missing_dep", "fine_dep"):
        sys.modules.pop(name, None)


def test_a_module_missing_a_package_runs_once_and_then_fails_at_once(package):
    outcome = litellm_imports.settle(("missing_dep",))
    assert outcome["missing_dep"].startswith("absent: No module named 'no_such_package_here'")
    for _ in range(3):  # what each proxy request does
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("missing_dep")
    assert importlib.import_module("runs").n == 1  # without settle: once per attempt, 4


def test_a_module_that_imports_is_left_as_it_is(package):
    assert litellm_imports.settle(("fine_dep",)) == {"fine_dep": "imported"}
    assert importlib.import_module("fine_dep") is sys.modules["fine_dep"]
    assert litellm_imports.settle(("fine_dep",)) == {"fine_dep": "imported"}
    assert importlib.import_module("runs").n == 10


def test_loading_the_hook_settles_litellms_retried_import():
    """The proxy loads the hook as its callback: from then on LiteLLM's OpenTelemetry logger is imported, or
    recorded as absent where opentelemetry-sdk is not installed (this venv), never retried per request."""
    code = (
        "import importlib.util, sys\n"
        "import regret_gateway.gateway.hook\n"
        "name = 'litellm.integrations.otel.logger'\n"
        "sdk = importlib.util.find_spec('opentelemetry') is not None and importlib.util.find_spec('opentelemetry.sdk') is not None\n"
        "print(sdk, name in sys.modules, sys.modules.get(name) is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    sdk, settled, absent = (w == "True" for w in out)
    assert settled and absent == (not sdk)
