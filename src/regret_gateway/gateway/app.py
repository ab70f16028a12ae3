"""LiteLLM's proxy app with the gateway on it: the ``/regret/*`` routes mounted behind their body checks, the
gateway's start-up under a plain ``litellm --config`` (:func:`start_in_proxy`), the app ``serve`` runs
(:class:`RegretApp`; built in :mod:`regret_gateway.gateway.server`), and ``serve``'s hand-over to LiteLLM's own
CLI where LiteLLM's database is configured."""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import sys
from pathlib import Path

from regret_gateway.gateway import bundled_cost_map
from regret_gateway.gateway.runtime import Gateway

log = logging.getLogger(__name__)


def litellm_environment() -> None:
    """What LiteLLM needs before its import here: the bundled model-cost map (no network at import) and
    httpx transport (respx-visible; the mock upstreams of the demo and tests)."""
    bundled_cost_map()
    os.environ.setdefault("DISABLE_AIOHTTP_TRANSPORT", "True")


MAX_BODY_BYTES = 64 * 1024  # a feedback body is a few hundred bytes


def guarded(inner):
    """``inner`` (an ASGI app: LiteLLM's proxy app, or its middleware stack) with client mistakes on
    ``/regret/*`` answered before any handler -- LiteLLM's auth and middleware included -- sees the body: 413
    for a body over MAX_BODY_BYTES on any method (by its Content-Length, or while it streams in), and on
    POST and PUT 422 for a body that is not a JSON object (or nests too deep to parse). The body is then
    replayed as it came; everything else passes through untouched."""

    async def guard(scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/regret/"):
            await inner(scope, receive, send)
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

        await inner(scope, replay, send)

    guard.regret_guarded = True  # type: ignore[attr-defined]
    return guard


def mount(app, gateway: Gateway, hook) -> None:
    """Serve ``gateway`` on LiteLLM's proxy ``app``: the ``/regret/*`` routes (once), the route check that lets a team's virtual key reach them
    (:func:`~regret_gateway.gateway.auth.allow_team_routes`), and the gateway the hook, the routes and custom
    auth use."""
    from regret_gateway.gateway.auth import allow_team_routes
    from regret_gateway.gateway.routes import router

    if not any(getattr(r, "path", "") == "/regret/feedback" for r in app.routes):
        app.include_router(router)
    allow_team_routes()
    hook.attach(gateway)
    app.state.regret_gateway = gateway


class RegretApp:
    """The ASGI app ``serve`` runs: LiteLLM's proxy app (``self.app``) behind :func:`guarded`, closing the
    gateway at the server's shutdown (the ASGI lifespan's, which uvicorn runs on SIGTERM and Ctrl-C before it re-raises the signal
    and the process ends): its queued decisions are written. ``state`` is the proxy app's."""

    def __init__(self, app) -> None:
        self.app = app
        self._guarded = guarded(app)

    @property
    def state(self):
        return self.app.state

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._closing(send))
            return
        await self._guarded(scope, receive, send)

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


def proxy_config_path() -> str | None:
    """The config file whose ``regret_gateway:`` section the hook serves: ``REGRET_GATEWAY_CONFIG`` where it is
    set, else the config the LiteLLM proxy of this process loaded (``litellm.proxy.proxy_server``'s
    ``user_config_file_path``, which ``litellm --config`` sets from 1.x on; ``CONFIG_FILE_PATH``, which older
    versions and LiteLLM's Docker image set; the ``config`` of ``WORKER_CONFIG``, which the CLI hands its
    workers); None where none is known."""
    explicit = os.environ.get("REGRET_GATEWAY_CONFIG")
    if explicit:
        return explicit
    server = sys.modules.get("litellm.proxy.proxy_server")
    loaded = getattr(server, "user_config_file_path", None)
    if isinstance(loaded, str) and loaded:
        return loaded
    if os.environ.get("CONFIG_FILE_PATH"):
        return os.environ["CONFIG_FILE_PATH"]
    try:
        worker = json.loads(os.environ.get("WORKER_CONFIG") or "{}")
    except ValueError:
        return None
    path = worker.get("config") if isinstance(worker, dict) else None
    return path if isinstance(path, str) and path else None


class StartupError(RuntimeError):
    """The hook cannot serve under this proxy (a config error, in one line)."""


def start_in_proxy(handler) -> Gateway | None:
    """Under a plain ``litellm --config`` (LiteLLM's CLI, Docker image, Helm chart): when the proxy imports
    the hook while it loads its config at start-up, build the gateway from that config's ``regret_gateway:``
    section, check it as ``serve`` does (one line naming the key where it cannot work), start it (store
    migrated, embedder loaded and warmed, router loaded: the first request waits for none of it) and mount
    the ``/regret/*`` routes on LiteLLM's app. Its queued decisions are written at the proxy's shutdown.

    Does nothing (None) where no proxy is loading a config in this process (an import by ``serve``, which
    attaches its own gateway, or by tests), or where the hook serves a gateway already."""
    server = sys.modules.get("litellm.proxy.proxy_server")
    if server is None or not getattr(server, "user_config_file_path", None) or handler.has_gateway:
        return None
    path = proxy_config_path()
    from regret_gateway.gateway.preflight import check_deployment, deployments

    try:
        settings = check_deployment(path)  # type: ignore[arg-type]
    except (ValueError, FileNotFoundError) as exc:
        log.error("regret-gateway: cannot start: %s", exc)
        raise StartupError(f"regret-gateway: {exc}") from None
    litellm_environment()
    gateway = Gateway(settings, model_list=deployments(path))  # type: ignore[arg-type]
    log.warning("regret-gateway: starting the gateway of %s (store, embedder, router)", path)
    gateway.start()
    app = server.app
    mount(app, gateway, handler)
    # The proxy has started its app (this runs inside its lifespan): its middleware stack is built, and the
    # /regret/* body checks go in front of it, before LiteLLM's own middleware reads a body.
    stack = app.middleware_stack if app.middleware_stack is not None else app.build_middleware_stack()
    if not getattr(stack, "regret_guarded", False):
        app.middleware_stack = guarded(stack)
    _close_at_shutdown(server, gateway)
    log.warning("regret-gateway: routing %r between %s; /regret/* routes mounted", settings.virtual_model,
                ", ".join(settings.models))  # fmt: skip
    return gateway


def litellm_database(config: str | Path) -> bool:
    """Whether the proxy of ``config`` uses LiteLLM's database (virtual keys, teams): its
    ``general_settings.database_url``, or DATABASE_URL in the environment."""
    from regret_gateway.config import read_yaml

    general = (read_yaml(config) or {}).get("general_settings") or {}
    return bool(general.get("database_url") or os.environ.get("DATABASE_URL"))


def run_litellm_cli(config: str | Path, host: str, port: int) -> int:
    """Run LiteLLM's own CLI on ``config`` (``litellm --config``: it sets its database up and runs its
    migrations as it always does, then serves; the hook starts inside it, :func:`start_in_proxy`) until it
    exits; SIGTERM and Ctrl-C are passed on to it. Its exit code."""
    import shutil
    import signal
    import subprocess

    cli = Path(sys.executable).with_name("litellm")
    command = [str(cli) if cli.is_file() else shutil.which("litellm") or "litellm", "--config", str(config),
               "--host", host, "--port", str(port)]  # fmt: skip
    child = subprocess.Popen(command)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: child.terminate())
    try:
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                child.send_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _close_at_shutdown(server, gateway: Gateway) -> None:
    """Close ``gateway`` (its queued decisions and outcomes written) in the proxy's shutdown: LiteLLM's lifespan
    awaits ``proxy_server.proxy_shutdown_event`` (a module global, looked up when it is called) once uvicorn
    stopped taking requests on SIGTERM or Ctrl-C -- after which uvicorn re-raises the signal, and the process
    ends without running ``atexit``. Where a LiteLLM version has no such function, ``atexit`` closes it."""
    original = getattr(server, "proxy_shutdown_event", None)
    if original is None or not asyncio.iscoroutinefunction(original):
        atexit.register(gateway.close)
        return

    async def proxy_shutdown_event(*args, **kwargs):
        try:
            await asyncio.get_running_loop().run_in_executor(None, gateway.close)
        finally:
            await original(*args, **kwargs)

    server.proxy_shutdown_event = proxy_shutdown_event
