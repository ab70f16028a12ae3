"""The proxy app with the hook and the feedback routes: ``regret-gateway serve`` runs it with uvicorn."""

from __future__ import annotations

import os
from pathlib import Path

from regret_gateway.config import load_settings
from regret_gateway.gateway.runtime import Gateway


def litellm_environment() -> None:
    """What LiteLLM needs before its import here: the bundled model-cost map (no network at import) and
    httpx transport (respx-visible; the mock upstreams of the demo and tests)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("DISABLE_AIOHTTP_TRANSPORT", "True")


def attach(app, gateway: Gateway) -> None:
    """Make ``gateway`` the one the hook, the /regret routes and custom auth of ``app`` use."""
    from regret_gateway.gateway.hook import handler

    handler.attach(gateway)
    app.state.regret_gateway = gateway


def build_app(config: str | Path, gateway: Gateway | None = None):
    """LiteLLM's proxy app configured from ``config`` (its config.yaml), plus the /regret routes, serving
    ``gateway`` (default: one built from the file's ``regret_gateway:`` section, not yet started)."""
    config = Path(config).resolve()
    if not config.is_file():
        raise FileNotFoundError(f"config file not found: {config}")
    os.environ["CONFIG_FILE_PATH"] = str(config)
    litellm_environment()
    from litellm.proxy.proxy_server import app

    from regret_gateway.gateway.routes import router

    if not any(getattr(r, "path", "") == "/regret/feedback" for r in app.routes):
        app.include_router(router)
    attach(app, gateway if gateway is not None else Gateway(load_settings(config)))
    return app


def serve(config: str | Path, host: str = "0.0.0.0", port: int = 4000) -> None:
    """Build the gateway, start it (embedder loaded and warmed, store migrated) and serve the proxy."""
    import uvicorn

    gateway = Gateway(load_settings(config))
    app = build_app(config, gateway)
    gateway.start()  # before the proxy takes traffic
    try:
        uvicorn.run(app, host=host, port=port)
    finally:
        gateway.close()  # on shutdown (SIGTERM, Ctrl-C) the queued decisions are written, not lost
