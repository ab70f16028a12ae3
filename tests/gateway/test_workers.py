"""Two proxy processes started at the same moment on one PostgreSQL and one artifact folder (how a
deployment runs several workers): the schema is migrated once (under the database lock) and both start,
both route and log, both swap to a newly published version without a restart, and after a SIGTERM no
decision is missing from the store."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

import httpx
import pytest
import yaml
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from regret_gateway.bench.local import LocalServer, free_port, mock_upstream, proxy_config, serve_process, wait_ready
from regret_gateway.config import EmbedderSpec
from regret_gateway.servable import PublishedRouter
from regret_gateway.store.engine import make_engine
from tests.store.conftest import PG_URL, _pg_admin, with_search_path

MODELS = ("model-a", "model-b", "model-c")
KEY = "sk-team-workers-1"
MASTER = "sk-master-workers-0123456789abcdef"


def _publish(root, dim: int) -> str:
    import torch

    from regret_gateway.artifacts import activate, save_artifact
    from regret_gateway.nn.networks import IntervalNets, StackedMLP
    from regret_gateway.servable import IntervalArrays, MLPArrays, RMIntervalPolicy

    torch.manual_seed(len(os.listdir(root)) if root.exists() else 0)
    policy = RMIntervalPolicy(
        MODELS, [0.0, 1000.0], MLPArrays.of(StackedMLP(2, dim, 3, (16,))), IntervalArrays.of(IntervalNets(1, 3))
    )
    path = save_artifact(
        root,
        router=PublishedRouter.serving(policy, {"premium": 0.0, "economy": 1000.0}),
        embedder={"model": EmbedderSpec().embedding_id},
    )
    activate(root, path.name)
    return path.name


def _ask(port: int, text_: str) -> str:
    headers = {"Authorization": f"Bearer {KEY}"}
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        headers=headers,
        timeout=60,
        json={"model": "regret-router", "messages": [{"role": "user", "content": text_}]},
    )
    assert r.status_code == 200, r.text
    rid = r.headers["x-regret-request-id"]
    audit = httpx.get(f"http://127.0.0.1:{port}/regret/decisions/{rid}", headers=headers, timeout=30)
    assert audit.status_code == 200, audit.text
    return audit.json()["router_version"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_workers_share_one_database_and_one_artifact_folder(tmp_path):
    admin = _pg_admin()
    schema = f"rg_workers_{uuid.uuid4().hex[:10]}"
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    url = with_search_path(PG_URL, schema)
    procs: list[subprocess.Popen] = []
    try:
        first = _publish(tmp_path / "artifacts", EmbedderSpec().static_dims)
        up_port, ports = free_port(), (free_port(), free_port())
        config = proxy_config(
            {
                "models": list(MODELS),
                "default_tier": "economy",
                "tiers": {"premium": {"lam": 0, "epsilon": 0.0}, "economy": {"lam": 1000, "epsilon": 0.0}},
                "teams": {"team-a": {"tier": "economy"}},
                "api_keys": {KEY: "team-a"},
                "store": {"url": url, "spill_dir": str(tmp_path / "spill"), "flush_interval_s": 0.1},
                "artifacts_dir": str(tmp_path / "artifacts"),
                "reload_interval_s": 0.2,
                "route_timeout_s": 10.0,
            },
            {m: (1e-6, 2e-6) for m in MODELS},
            f"http://127.0.0.1:{up_port}/v1",
            custom_auth=True,
        )
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        env = {**os.environ, "LITELLM_MASTER_KEY": MASTER, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        with LocalServer(mock_upstream(lambda model, prompt: (f"from {model}", 20, 5)), up_port):
            for port in ports:  # both at the same moment: they race for the migration
                procs.append(serve_process(tmp_path / "config.yaml", port, env))
            for port, proc in zip(ports, procs):
                wait_ready(port, proc)
            sent = 0
            for port in ports:
                for i in range(10):
                    assert _ask(port, f"Write a haiku about queue number {i} on {port}") == first
                    sent += 1
            second = _publish(tmp_path / "artifacts", EmbedderSpec().static_dims)
            for port in ports:  # each worker swaps without a restart
                deadline = time.monotonic() + 30
                version = None
                while version != second and time.monotonic() < deadline:
                    version = _ask(port, "Translate 'good morning' into French")
                    sent += 1
                assert version == second, f"worker on {port} still routes with {version}"
            time.sleep(1.0)  # the success events of the last answers
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                out, _ = proc.communicate(timeout=60)
                assert "Traceback" not in out, out[-4000:]
        engine = make_engine(url)
        try:
            with Session(engine) as s:
                from regret_gateway.store.schema import Decision, Outcome

                assert s.scalar(select(func.count()).select_from(Decision)) == sent
                assert s.scalar(select(func.count()).select_from(Outcome)) == sent
                assert s.scalar(text("SELECT count(*) FROM alembic_version")) == 1
        finally:
            engine.dispose()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
