"""What ``regret-gateway serve`` runs: LiteLLM's proxy app configured from the config file, with the gateway
mounted (:func:`~regret_gateway.gateway.app.mount`) and served by uvicorn. The gateway is built and started
before the proxy takes traffic, as under a plain ``litellm --config``."""

from __future__ import annotations

import os
from pathlib import Path

from regret_gateway.config import load_settings
from regret_gateway.gateway.app import RegretApp, litellm_environment, mount
from regret_gateway.gateway.hook import handler
from regret_gateway.gateway.runtime import Gateway


def attach(app, gateway: Gateway) -> None:
    """Make ``gateway`` the one the registered hook, the /regret routes and custom auth of ``app`` use."""
    handler.attach(gateway)
    app.state.regret_gateway = gateway


def build_app(config: str | Path, gateway: Gateway | None = None) -> RegretApp:
    """LiteLLM's proxy app configured from ``config`` (its config.yaml), plus the /regret routes, serving
    ``gateway`` (default: one built from the file's ``regret_gateway:`` section, not yet started), as a
    :class:`~regret_gateway.gateway.app.RegretApp`."""
    config = Path(config).resolve()
    if not config.is_file():
        raise FileNotFoundError(f"config file not found: {config}")
    os.environ["CONFIG_FILE_PATH"] = str(config)  # the config LiteLLM's start-up loads
    litellm_environment()
    from litellm.proxy.proxy_server import app

    mount(app, gateway if gateway is not None else Gateway(load_settings(config)), handler)
    return RegretApp(app)


def serve(config: str | Path, host: str = "0.0.0.0", port: int = 4000) -> None:
    """Build the gateway, start it (embedder loaded and warmed, store migrated, model info read) and serve the
    proxy."""
    import uvicorn

    from regret_gateway.gateway.preflight import check_deployment, deployments

    gateway = Gateway(check_deployment(config), model_list=deployments(config))
    app = build_app(config, gateway)
    gateway.start()  # before the proxy takes traffic
    try:
        uvicorn.run(app, host=host, port=port)
    finally:
        gateway.close()  # the lifespan's shutdown closed it already (SIGTERM, Ctrl-C); this covers a failed start
