"""SIGKILL loss window: a real `serve` (default flush interval 1 s), requests one after another for ~3 s, then
SIGKILL right after the last answer; count the decisions stored against those answered. Three draws.

    python experiments/sigkill_window.py
"""

import os
import shutil
import signal
import sqlite3
import tempfile
import time

import httpx
import yaml

from regret_gateway.bench.local import LocalServer, free_port, mock_upstream, proxy_config, serve_process, wait_ready

up = free_port()
scratch = tempfile.mkdtemp(prefix="sigkill-")
with LocalServer(mock_upstream(lambda m, t: ("ok", 10, 2)), up):
    for draw in range(3):
        port, tmp = free_port(), f"{scratch}/kill{draw}"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        section = {
            "models": ["a", "b"],
            "tiers": {"standard": {"lam": 0, "epsilon": 0}},
            "api_keys": {"sk-team-1": "team"},
            "embedder": {"backend": "torch"},
            "store": {"url": f"sqlite:///{tmp}/gw.db", "spill_dir": f"{tmp}/spill"},
            "artifacts_dir": f"{tmp}/artifacts",
        }
        cfg = proxy_config(section, {"a": (1e-6, 1e-6), "b": (2e-6, 2e-6)}, f"http://127.0.0.1:{up}/v1", custom_auth=True)
        open(f"{tmp}/config.yaml", "w").write(yaml.safe_dump(cfg))
        env = {**os.environ, "LITELLM_MASTER_KEY": "sk-master-test-0123456789abcdef", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        p = serve_process(f"{tmp}/config.yaml", port, env, open(f"{tmp}/log", "w"))  # noqa: SIM115
        wait_ready(port, p)
        base = f"http://127.0.0.1:{port}"
        answered, t0 = 0, time.monotonic()
        with httpx.Client(base_url=base, headers={"Authorization": "Bearer sk-team-1"}) as c:
            while time.monotonic() - t0 < 3.0:
                r = c.post(
                    "/v1/chat/completions",
                    json={"model": "regret-router", "messages": [{"role": "user", "content": f"q {answered}"}]},
                )
                answered += r.status_code == 200
        elapsed = time.monotonic() - t0
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        db = sqlite3.connect(f"{tmp}/gw.db")
        stored = db.execute("select count(*) from decisions").fetchone()[0]
        outcomes = db.execute("select count(*) from outcomes").fetchone()[0]
        rate = answered / elapsed
        print(
            f"draw {draw}: answered {answered} in {elapsed:.1f} s ({rate:.0f}/s); stored {stored} decisions, {outcomes} outcomes; "
            f"lost {answered - stored} decisions = {(answered - stored) / rate:.2f} s of traffic"
        )
