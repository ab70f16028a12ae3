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


MAX_BODY_BYTES = 64 * 1024  # a feedback body is a few hundred bytes


def _limit_regret_bodies(app) -> None:
    """Client mistakes on /regret/* get a 4xx before any handler (LiteLLM's auth included) sees the body:
    413 for a body over MAX_BODY_BYTES (by its Content-Length; 411 without one), 422 for a body that is
    not a JSON object."""
    import json

    from fastapi.responses import JSONResponse

    @app.middleware("http")
    async def limit(request, call_next):
        if request.url.path.startswith("/regret/") and request.method in ("POST", "PUT", "PATCH"):
            length = request.headers.get("content-length")
            if length is None and request.headers.get("transfer-encoding"):
                return JSONResponse({"detail": "a Content-Length is required on /regret/*"}, status_code=411)
            if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
                return JSONResponse({"detail": f"request body over {MAX_BODY_BYTES} bytes"}, status_code=413)
            try:
                body = json.loads(await request.body() or b"null")
            except ValueError:
                body = None
            if not isinstance(body, dict):
                return JSONResponse({"detail": "the request body must be a JSON object"}, status_code=422)
        return await call_next(request)


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
        _limit_regret_bodies(app)
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
