"""The hook in the LiteLLM people run: the README's hook section, as written, beside a model_list, started
with LiteLLM's own CLI (``litellm --config``, as its Docker image and Helm chart start the proxy), not
``serve``. The gateway is built while LiteLLM loads the config (the first request waits for nothing), the
``/regret/*`` routes are on LiteLLM's app, and a team's key and the admin's reach them."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

import httpx
import pytest
import yaml

from regret_gateway.bench.local import LocalServer, echo_response, free_port, mock_upstream, wait_ready

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- hook-section: tests/gateway/test_plain_litellm.py runs this block with `litellm --config` -->"
MASTER = "sk-master-plain-litellm-0123456789"
KEYS = {"RESEARCH_KEY": "sk-research-plain-1", "SUPPORT_KEY": "sk-support-plain-1"}


def hook_section() -> dict:
    """The YAML block that follows the README's hook-section marker, exactly as written."""
    readme = (ROOT / "README.md").read_text()
    assert MARKER in readme, "the README's hook section lost its marker"
    block = re.search(r"```yaml\n(.*?)```", readme[readme.index(MARKER) :], re.DOTALL)
    assert block is not None
    return yaml.safe_load(block.group(1))


def config_with(section: dict, api_base: str) -> dict:
    """A user's config: a model_list of their own (here a local upstream, priced) and the README's section."""
    models = section["regret_gateway"]["models"]
    model_list = [{"model_name": m, "litellm_params": {"model": f"openai/{m}", "api_base": api_base, "api_key": "sk-up",
                                                       "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}}
                  for m in models]  # fmt: skip
    return {"model_list": model_list, **section}


@pytest.mark.slow  # LiteLLM's CLI in a process of its own
def test_the_readmes_hook_section_runs_under_plain_litellm(tmp_path):
    up, port = free_port(), free_port()
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config_with(hook_section(), f"http://127.0.0.1:{up}/v1")))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(Path.home()), "LANG": "C.UTF-8",
           "LITELLM_MASTER_KEY": MASTER, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **KEYS}  # fmt: skip
    with LocalServer(mock_upstream(echo_response), up):
        proc = subprocess.Popen(["litellm", "--config", "config.yaml", "--host", "127.0.0.1", "--port", str(port)],
                                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        try:
            wait_ready(port, proc)
            base, admin = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {MASTER}"}
            research = {"Authorization": f"Bearer {KEYS['RESEARCH_KEY']}"}
            # built while LiteLLM loaded its config: before any request the encoder is loaded, nothing routed yet
            stats = httpx.get(f"{base}/regret/stats", headers=admin, timeout=30)
            assert stats.status_code == 200, stats.text
            assert stats.json()["embedding_backend"] == "static" and stats.json()["routed"] == 0, stats.json()
            ask = {"model": "regret-router", "messages": [{"role": "user", "content": "Write a haiku about routers"}]}
            routed = httpx.post(f"{base}/v1/chat/completions", headers=research, json=ask, timeout=60)
            assert routed.status_code == 200, routed.text
            rid = routed.headers["x-regret-request-id"]
            assert routed.headers["x-regret-tier"] == "premium"  # the README's teams: research is premium
            direct = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
            passthrough = httpx.post(f"{base}/v1/chat/completions", headers=admin, json=direct, timeout=60)
            assert passthrough.status_code == 200 and "x-regret-request-id" not in passthrough.headers, passthrough.text
            score = httpx.post(f"{base}/regret/feedback", headers=research, json={"request_id": rid, "score": 1.0}, timeout=30)
            assert score.status_code == 200, score.text
            audit = httpx.get(f"{base}/regret/decisions/{rid}", headers=research, timeout=30)
            assert audit.status_code == 200 and audit.json()["feedback_by_source"]["user"]["score"] == 1.0, audit.text
            metrics = httpx.get(f"{base}/regret/metrics", headers=admin, timeout=30)
            assert (
                metrics.status_code == 200
                and 'regret_gateway_requests_total{outcome="routed",tier="premium"} 1.0' in metrics.text
            )
            assert httpx.get(f"{base}/regret/metrics", headers=research, timeout=30).status_code == 403  # the admin's
            bad = httpx.post(f"{base}/regret/feedback", headers=research, json=[1], timeout=30)
            assert bad.status_code == 422, bad.text  # a client's mistake, answered before LiteLLM's auth reads it
            last = httpx.post(f"{base}/v1/chat/completions", headers=research, json=ask, timeout=60)
            assert last.status_code == 200, last.text
        finally:
            proc.terminate()  # SIGTERM, as every deploy sends it: what is queued is written as the process exits
            out, _ = proc.communicate(timeout=60)
    assert "Traceback" not in out, out[-4000:]
    import sqlite3

    with sqlite3.connect(tmp_path / "regret-gateway.db") as db:  # the README's store
        stored = db.execute("SELECT o.status FROM decisions d JOIN outcomes o ON o.request_id = d.request_id "
                            "WHERE d.request_id = ?", (last.headers["x-regret-request-id"],)).fetchall()  # fmt: skip
    assert stored == [("success",)]


def test_a_misspelled_section_stops_the_proxys_start_in_one_line(tmp_path, monkeypatch, caplog):
    """LiteLLM imports the hook while it loads a config: a config the gateway cannot serve stops the start with
    one line naming the mistake, instead of a proxy that answers 500 to every request."""
    from fastapi import FastAPI

    from regret_gateway.gateway.app import StartupError, start_in_proxy
    from regret_gateway.gateway.hook import RegretRouterHook

    bad = config_with(hook_section(), "http://127.0.0.1:9/v1")
    bad["regret_gatway"] = bad.pop("regret_gateway")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    monkeypatch.delenv("REGRET_GATEWAY_CONFIG", raising=False)
    proxy = types.SimpleNamespace(user_config_file_path=str(tmp_path / "bad.yaml"), app=FastAPI())
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", proxy)
    with pytest.raises(StartupError) as error:
        start_in_proxy(RegretRouterHook())
    assert "no `regret_gateway:` section (is `regret_gatway:` a misspelling of it?)" in str(error.value)
    assert "\n" not in str(error.value)
    assert not any(getattr(r, "path", "").startswith("/regret/") for r in proxy.app.routes)  # nothing half mounted


def test_an_import_outside_a_proxys_config_load_builds_nothing(monkeypatch):
    """``serve`` and tests import the hook before any proxy loads a config: nothing is built then."""
    from regret_gateway.gateway.app import start_in_proxy
    from regret_gateway.gateway.hook import RegretRouterHook

    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", types.SimpleNamespace(user_config_file_path=None))
    hook = RegretRouterHook()
    assert start_in_proxy(hook) is None and not hook.has_gateway


def test_the_hook_reads_the_config_litellm_loaded(monkeypatch, tmp_path):
    """LiteLLM 1.108 sets neither CONFIG_FILE_PATH nor anything else the hook used to read: the path of the
    config it loaded is its proxy module's ``user_config_file_path``; older versions and LiteLLM's image set
    CONFIG_FILE_PATH, the CLI hands its workers WORKER_CONFIG; REGRET_GATEWAY_CONFIG overrides them all."""
    import json

    from regret_gateway.gateway.app import proxy_config_path

    for var in ("REGRET_GATEWAY_CONFIG", "CONFIG_FILE_PATH", "WORKER_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    proxy = types.SimpleNamespace(user_config_file_path=None)
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server", proxy)
    assert proxy_config_path() is None
    monkeypatch.setenv("WORKER_CONFIG", json.dumps({"config": "/w.yaml", "port": 4000}))
    assert proxy_config_path() == "/w.yaml"
    monkeypatch.setenv("CONFIG_FILE_PATH", "/c.yaml")
    assert proxy_config_path() == "/c.yaml"
    proxy.user_config_file_path = "/loaded.yaml"
    assert proxy_config_path() == "/loaded.yaml"
    monkeypatch.setenv("REGRET_GATEWAY_CONFIG", "/explicit.yaml")
    assert proxy_config_path() == "/explicit.yaml"
