"""Score an answer (0..1) so the next `regret-gateway retrain` learns from it; then read the audit.

RESEARCH_KEY=sk-... python examples/feedback.py REQUEST_ID 1.0
"""

import os
import sys

import httpx

base = os.environ.get("GATEWAY_URL", "http://localhost:4000/v1").removesuffix("/v1")  # the same variable as client.py
headers = {"Authorization": f"Bearer {os.environ['RESEARCH_KEY']}"}
request_id, score = sys.argv[1], float(sys.argv[2])

r = httpx.post(f"{base}/regret/feedback", headers=headers, json={"request_id": request_id, "score": score, "source": "user"})
r.raise_for_status()
print("stored:", r.json())

audit = httpx.get(f"{base}/regret/decisions/{request_id}", headers=headers).json()
print(f"tier {audit['tier']} (lambda {audit['lam']}), chose {audit['chosen_model']} with p={audit['propensity']:.3f}")
print("router scores:", audit["scores"])
