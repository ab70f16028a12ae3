"""The README's "try it" commands, as a newcomer runs them: `serve --mock-upstream` on the example config
(no provider keys), the example client, a score with the example feedback script, then `status`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from regret_gateway.bench.local import free_port, wait_ready

pytestmark = pytest.mark.slow  # starts the LiteLLM proxy in a process of its own

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"LITELLM_MASTER_KEY": "sk-master-change-me-0123456789", "RESEARCH_KEY": "sk-research-1",
        "PRODUCT_KEY": "sk-product-1", "SUPPORT_KEY": "sk-support-1"}  # fmt: skip
MODELS = ("gpt-4o-mini", "claude-haiku", "gpt-4o")  # examples/config.yaml's model_list


def test_the_quick_start_answers_scores_and_reports_without_provider_keys(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env |= KEYS | {"GATEWAY_URL": f"http://127.0.0.1:{port}/v1"}
    cli = [sys.executable, "-m", "regret_gateway"]
    config = str(ROOT / "examples" / "config.yaml")
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*cli, "serve", "--config", config, "--mock-upstream", "--host", "127.0.0.1", "--port", str(port)],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        wait_ready(port, proc)

        def run(*args: str) -> str:
            out = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stdout + out.stderr
            return out.stdout

        answer = run(sys.executable, str(ROOT / "examples" / "client.py"), "Write a haiku about routers")
        routed = re.search(r"answered by (\S+) \(tier premium\); request id (rg-[0-9a-f]+)", answer)
        assert routed is not None and routed.group(1) in MODELS, answer
        assert f"[{routed.group(1)}, a mock answer] Write a haiku about routers" in answer
        scored = run(sys.executable, str(ROOT / "examples" / "feedback.py"), routed.group(2), "1.0")
        assert f"chose {routed.group(1)}" in scored, scored
        status = run(*cli, "status", "--config", config)
        assert "with feedback 1" in status and "feedback from user: 1" in status, status
        assert "team support: budget $500.00 per month" in status, status  # the example's budget, nothing spent yet
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
