"""The proxy app with the hook and the feedback routes: ``regret-gateway serve`` runs it with uvicorn."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from regret_gateway.config import load_settings
from regret_gateway.gateway import bundled_cost_map
from regret_gateway.gateway.runtime import Gateway


def litellm_environment() -> None:
    """What LiteLLM needs before its import here: the bundled model-cost map (no network at import) and
    httpx transport (respx-visible; the mock upstreams of the demo and tests)."""
    bundled_cost_map()
    os.environ.setdefault("DISABLE_AIOHTTP_TRANSPORT", "True")


MAX_BODY_BYTES = 64 * 1024  # a feedback body is a few hundred bytes


class RegretApp:
    """The ASGI app ``serve`` runs: LiteLLM's proxy app (``self.app``), with client mistakes on
    ``/regret/*`` answered before any handler -- LiteLLM's auth included -- sees the body: 413 for a body
    over MAX_BODY_BYTES on any method (by its Content-Length, or while it streams in), and on POST and PUT
    422 for a body that is not a JSON object (or nests too deep to parse). Everything else passes through
    untouched. ``state`` is the proxy app's.

    At the server's shutdown (the ASGI lifespan's, which uvicorn runs on SIGTERM and Ctrl-C before it
    re-raises the signal and the process ends) the gateway is closed: its queued decisions are written."""

    def __init__(self, app) -> None:
        self.app = app

    @property
    def state(self):
        return self.app.state

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._closing(send))
            return
        if scope["type"] != "http" or not scope["path"].startswith("/regret/"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"0")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            await _reply(send, 413, f"request body over {MAX_BODY_BYTES} bytes")
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_BODY_BYTES:
                await _reply(send, 413, f"request body over {MAX_BODY_BYTES} bytes")
                return
        try:
            parsed = json.loads(body or b"null") if scope["method"] in ("POST", "PUT") else {}
        except (ValueError, RecursionError):  # RecursionError: nested thousands deep
            parsed = None
        if not isinstance(parsed, dict):
            await _reply(send, 422, "the request body must be a JSON object")
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _closing(self, send):
        """``send`` of the lifespan, closing the gateway before the server is told the shutdown is complete."""

        async def closing_send(message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                gateway = getattr(self.app.state, "regret_gateway", None)
                if gateway is not None:
                    await asyncio.get_running_loop().run_in_executor(None, gateway.close)
            await send(message)

        return closing_send


async def _reply(send, status: int, detail: str) -> None:
    payload = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": payload})


def attach(app, gateway: Gateway) -> None:
    """Make ``gateway`` the one the hook, the /regret routes and custom auth of ``app`` use."""
    from regret_gateway.gateway.hook import handler

    handler.attach(gateway)
    app.state.regret_gateway = gateway


def build_app(config: str | Path, gateway: Gateway | None = None):
    """LiteLLM's proxy app configured from ``config`` (its config.yaml), plus the /regret routes, serving
    ``gateway`` (default: one built from the file's ``regret_gateway:`` section, not yet started), as a
    :class:`RegretApp`."""
    config = Path(config).resolve()
    if not config.is_file():
        raise FileNotFoundError(f"config file not found: {config}")
    os.environ["CONFIG_FILE_PATH"] = str(config)
    litellm_environment()
    from litellm.proxy.proxy_server import app

    from regret_gateway.gateway.routes import router

    if not any(getattr(r, "path", "") == "/regret/feedback" for r in app.routes):
        app.include_router(router)
    wrapped = RegretApp(app)
    attach(wrapped, gateway if gateway is not None else Gateway(load_settings(config)))
    return wrapped


def serve(config: str | Path, host: str = "0.0.0.0", port: int = 4000) -> None:
    """Build the gateway, start it (embedder loaded and warmed, store migrated) and serve the proxy."""
    import uvicorn

    from regret_gateway.gateway.preflight import check_deployment

    gateway = Gateway(check_deployment(config))
    app = build_app(config, gateway)
    gateway.start()  # before the proxy takes traffic
    try:
        uvicorn.run(app, host=host, port=port)
    finally:
        gateway.close()  # the lifespan's shutdown closed it already (SIGTERM, Ctrl-C); this covers a failed start
