"""What LiteLLM's proxy spends on each request retrying an import that cannot succeed, and what it spends once
the hook has settled it (gateway/litellm_imports.py): the same statement LiteLLM runs in every request's
authentication (user_api_key_auth._seed_request_destinations), timed in one process, unsettled rounds and
settled rounds in turn.

    python experiments/retried_import.py [--calls 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import time

from regret_gateway.gateway.app import litellm_environment

NAME = "litellm.integrations.otel.logger"


def attempt() -> None:
    try:
        from litellm.integrations.otel.logger import fan_out_provider  # noqa: F401 - LiteLLM's own statement
    except Exception:  # noqa: BLE001 - as LiteLLM: swallowed
        pass


def per_call(calls: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per attempt, the mean over ``calls``."""
    w, c = time.perf_counter(), time.process_time()
    for _ in range(calls):
        attempt()
    return 1e3 * (time.perf_counter() - w) / calls, 1e3 * (time.process_time() - c) / calls


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    litellm_environment()
    import litellm  # noqa: F401 - imported before timing, as in the proxy

    from regret_gateway.gateway import litellm_imports

    attempt()  # the first attempt imports what the logger imports before it fails: not per-request cost
    print("| round | LiteLLM's import | wall ms per request | CPU ms per request |\n|---:|---|---:|---:|")
    for r in range(1, args.rounds + 1):
        sys.modules.pop(NAME, None)  # unsettled: as stock LiteLLM
        print("| %d | retried (stock) | %.3f | %.3f |" % (r, *per_call(args.calls)))
        outcome = litellm_imports.settle()
        print("| %d | settled (%s) | %.4f | %.4f |" % (r, outcome[NAME].split(":")[0], *per_call(args.calls)))
    sys.modules.pop(NAME, None)


if __name__ == "__main__":
    main()
