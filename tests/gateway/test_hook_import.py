"""Importing the hook (what LiteLLM does at start-up) touches no network: LiteLLM reads its bundled cost map."""

import os
import subprocess
import sys

PROBE = """
import socket
calls = []
def refuse(*args, **kwargs):
    calls.append(args[:2])
    raise OSError("no network in this test")
socket.getaddrinfo = refuse
socket.create_connection = refuse
socket.socket.connect = lambda self, *args: refuse(*args)
import regret_gateway.gateway.hook
print("network calls:", calls)
"""


def test_importing_the_hook_makes_no_network_call():
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}  # as a fresh shell has it
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "network calls: []", out.stdout + out.stderr[-2000:]
