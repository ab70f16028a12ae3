"""The proxy app with the hook and the feedback routes: ``regret-gateway serve`` runs it with uvicorn."""

from __future__ import annotations

import os
from pathlib import Path


def build_app(config: str | Path):
    """LiteLLM's proxy app configured from ``config`` (its config.yaml), plus the /regret routes."""
    config = Path(config).resolve()
    if not config.is_file():
        raise FileNotFoundError(f"config file not found: {config}")
    os.environ["CONFIG_FILE_PATH"] = str(config)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from litellm.proxy.proxy_server import app

    from regret_gateway.gateway.routes import router

    if not any(getattr(r, "path", "") == "/regret/feedback" for r in app.routes):
        app.include_router(router)
    return app


def serve(config: str | Path, host: str = "0.0.0.0", port: int = 4000) -> None:
    import uvicorn

    uvicorn.run(build_app(config), host=host, port=port)
