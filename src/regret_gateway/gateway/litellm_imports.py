"""LiteLLM's imports that fail the same way on every request, made to fail once.

LiteLLM's proxy (1.108) imports its OpenTelemetry logger inside the authentication of every request
(``user_api_key_auth._seed_request_destinations``) and swallows the error where ``opentelemetry-sdk`` is not
installed. Python does not remember a failed import: each request runs the module's first lines again and
searches the path for the missing package, about 10 ms of CPU a request on the project's 2-core machine
(docs/experiments/gateway-overhead.md#litellms-retried-import), more than the hook's whole cost.

:func:`settle` imports each such module once at the proxy's start; where it cannot be imported because a
package it needs is not installed, ``sys.modules`` records it as absent (``None``), so each later import
raises the same ``ModuleNotFoundError`` at once. Where it imports, nothing changes.
"""

from __future__ import annotations

import importlib
import logging
import sys

log = logging.getLogger("regret_gateway")

RETRIED = ("litellm.integrations.otel.logger",)  # imported, and swallowed when missing, on every proxy request


def settle(names: tuple[str, ...] = RETRIED) -> dict[str, str]:
    """Import each of ``names`` once; one that a missing package keeps from importing is recorded as absent.
    Returns name -> ``imported`` | ``absent: <why>`` (already settled ones included)."""
    outcome = {}
    for name in names:
        if name in sys.modules:
            outcome[name] = "imported" if sys.modules[name] is not None else "absent"
            continue
        try:
            importlib.import_module(name)
            outcome[name] = "imported"
        except ModuleNotFoundError as exc:  # a package it needs is not installed: the same failure every time
            sys.modules[name] = None  # type: ignore[assignment]
            outcome[name] = f"absent: {exc}"
            log.info("%s cannot be imported (%s): recorded as absent, so LiteLLM's requests no longer retry it", name, exc)
    return outcome
