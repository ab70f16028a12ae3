"""Score an answer (0..1) so the next `regret-gateway retrain` learns from it; then read the audit.

RESEARCH_KEY=sk-... python examples/feedback.py REQUEST_ID 1.0
"""

import os
import sys

import httpx

base = os.environ.get("GATEWAY_URL", "http://localhost:4000/v1").removesuffix("/v1")  # the same variable as client.py
headers = {"Authorization": f"Bearer {os.environ['RESEARCH_KEY']}"}
if len(sys.argv) != 3:
    sys.exit("usage: python examples/feedback.py REQUEST_ID SCORE  (the request id client.py printed; a score in [0, 1])")
request_id, score = sys.argv[1], float(sys.argv[2])

# The gateway may wait a few seconds for a request id another replica has not written yet (feedback_grace_s).
with httpx.Client(base_url=base, headers=headers, timeout=30) as gateway:
    try:
        r = gateway.post("/regret/feedback", json={"request_id": request_id, "score": score, "source": "user"})
        if r.status_code != 200:
            sys.exit(f"the score was not stored: HTTP {r.status_code}: {r.text[:300]}")
        print("stored:", r.json())
        audit = gateway.get(f"/regret/decisions/{request_id}").json()
    except httpx.HTTPError as exc:
        sys.exit(f"the gateway at {base} did not answer ({type(exc).__name__}: {exc})")
print(f"tier {audit['tier']} (lambda {audit['lam']}), chose {audit['chosen_model']} with p={audit['propensity']:.3f}")
print("router scores:", audit["scores"])
