"""`regret-gateway serve` as a real process: what a deployment's process manager (Kubernetes) does to it."""

from __future__ import annotations

import signal

import httpx
import pytest
import yaml
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import Session

from regret_gateway.bench.local import LocalServer, free_port, mock_upstream, proxy_config, serve_env, serve_process, wait_ready

pytestmark = pytest.mark.slow  # starts the LiteLLM proxy in a process of its own

MASTER = "sk-master-test-0123456789abcdef"


def test_sigterm_writes_every_queued_decision_before_the_process_ends(tmp_path):
    """20 answered requests, the writer told to flush only every 60 s, then SIGTERM (every deploy): the
    process exits and all 20 decisions, with their outcomes, are in the store."""
    from regret_gateway.store.schema import Decision, Outcome

    upstream_port, port = free_port(), free_port()
    section = {
        "models": ["a", "b"],
        "tiers": {"standard": {"lam": 0, "epsilon": 0}},
        "api_keys": {"sk-team-1": "team"},
        "embedder": {"backend": "torch"},
        "store": {"url": f"sqlite:///{tmp_path}/gw.db", "spill_dir": str(tmp_path / "spill"), "flush_interval_s": 60},
        "artifacts_dir": str(tmp_path / "artifacts"),
    }
    cfg = proxy_config(section, {"a": (1e-6, 1e-6), "b": (2e-6, 2e-6)}, f"http://127.0.0.1:{upstream_port}/v1", custom_auth=True)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = serve_env(MASTER)
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    with LocalServer(mock_upstream(lambda model, text: (f"answer from {model}", 12, 3)), upstream_port):
        proc = serve_process(tmp_path / "config.yaml", port, env, log)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_ready(port, proc)
            with httpx.Client(base_url=base, headers={"Authorization": "Bearer sk-team-1"}, timeout=30) as client:
                for i in range(20):
                    r = client.post("/v1/chat/completions",
                                    json={"model": "regret-router", "messages": [{"role": "user", "content": f"question {i}"}]})  # fmt: skip
                    assert r.status_code == 200, r.text
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
            log.close()
    engine = create_engine(f"sqlite:///{tmp_path}/gw.db")
    with Session(engine) as session:
        decisions = session.scalar(select(func.count()).select_from(Decision))
        outcomes = session.scalar(select(func.count()).select_from(Outcome))
    engine.dispose()
    assert (decisions, outcomes) == (20, 20), (tmp_path / "serve.log").read_text()[-3000:]
