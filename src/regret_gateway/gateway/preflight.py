"""What ``serve`` checks before it starts: a deployment that cannot work is refused with one line naming
the key, instead of failing requests (or dying with a traceback) later.

- every model of ``regret_gateway.models`` and the judge's model is a ``model_name`` of the proxy's
  ``model_list``, every deployment's ``model_info`` flags are booleans, its token limits positive integers
  and its prices non-negative numbers, and every deployment of a routed model has a price per input and output token (LiteLLM's
  cost map, or the deployment's ``input_cost_per_token`` and ``output_cost_per_token``; 0 stated is a
  price): the router weighs quality against cost, and a model logged at $0 would be learned as free
  (both skipped where LiteLLM keeps its models in its database: ``store_model_in_db``);
- ``regret_gateway.store.url`` is an SQLite or PostgreSQL URL whose driver is installed, and an SQLite
  file's folder exists (the store is not contacted: a server that is down at start heals, and the writer
  spills meanwhile);
- every ``os.environ/VAR`` the gateway reads is set: the proxy's ``general_settings.master_key``
  (LiteLLM refuses to start without it) and each team key of ``regret_gateway.api_keys`` (a key that is
  not set would be the empty string);
- the embedder can load: a published encoder (``embedder.exported``: the static one with ``kind: static``,
  the ONNX graph with ``kind: transformer``) is whole and is the configured model's; without one, torch and
  transformers are installed (the ``torch`` extra) to distil or load it.
"""

from __future__ import annotations

import os
from pathlib import Path

from regret_gateway.config import Settings, env_var, load_settings, read_yaml
from regret_gateway.limits import is_number, is_whole

STORE_BACKENDS = ("sqlite", "postgresql")


class DeploymentError(ValueError):
    """A config the gateway cannot serve with; the message names the key."""


def check_deployment(config: str | Path) -> Settings:
    """The deployment's settings, once every check above passed; raises :class:`DeploymentError`."""
    settings = load_settings(config)
    raw = read_yaml(config) or {}
    model_list = _deployments(raw)
    if model_list is not None:
        _check_models(settings, model_list)
        _check_model_info(model_list)
    check_store_url(settings.store.url)
    _check_environment(settings, raw.get("general_settings") or {})
    check_embedder(settings)
    if model_list is not None:
        _check_prices(settings, model_list)
    return settings


def deployments(config: str | Path) -> list[dict] | None:
    """The proxy config's ``model_list`` as written; None where LiteLLM keeps its models in its database
    (``general_settings.store_model_in_db``): the running proxy's router knows them then."""
    return _deployments(read_yaml(config) or {})


def _deployments(raw: dict) -> list[dict] | None:
    if (raw.get("general_settings") or {}).get("store_model_in_db"):
        return None
    model_list = raw.get("model_list")
    return model_list if isinstance(model_list, list) else []


_FLAGS = ("supports_function_calling", "supports_vision", "supports_response_schema", "supports_parallel_function_calling",
          "supports_prompt_caching", "supports_system_messages", "supports_tool_choice", "supports_audio_input",
          "supports_audio_output", "supports_pdf_input", "supports_reasoning")  # fmt: skip
_COUNTS = ("max_tokens", "max_input_tokens", "max_output_tokens")


def _check_model_info(model_list: list) -> None:
    """Refuse a deployment's ``model_info`` value of the wrong type: LiteLLM accepts the config, then fails
    every answer of that deployment in its own model-group validation (HTTP 500 after the upstream answered);
    the gateway would read the value as unknown and send tools or images where they are not taken."""
    for entry in model_list:
        info = entry.get("model_info") if isinstance(entry, dict) else None
        if info is None:
            continue
        name = entry.get("model_name")
        if not isinstance(info, dict):
            raise DeploymentError(f"model_list: {name!r}'s model_info must be a mapping, got {type(info).__name__}")
        for key, value in info.items():
            if key in _FLAGS and not isinstance(value, bool):
                raise DeploymentError(f"model_list: {name!r} model_info.{key}: {value!r} is not true or false")
            if key in _COUNTS and not (is_whole(value) and value > 0):
                raise DeploymentError(
                    f"model_list: {name!r} model_info.{key}: {value!r} is not a positive whole number of tokens"
                )
            if key.endswith("_cost_per_token") and not (is_number(value) and value >= 0):
                raise DeploymentError(f"model_list: {name!r} model_info.{key}: {value!r} is not a price (USD, >= 0)")


def _check_prices(settings: Settings, model_list: list) -> None:
    from regret_gateway.gateway.model_info import deployment_info

    for entry in model_list:
        if not isinstance(entry, dict) or entry.get("model_name") not in settings.models:
            continue
        info = deployment_info(entry)
        if info.input_cost_per_token is None or info.output_cost_per_token is None:
            model = (entry.get("litellm_params") or {}).get("model")
            raise DeploymentError(
                f"model_list: {entry['model_name']!r} ({model}) has no price LiteLLM knows: set its litellm_params' "
                "input_cost_per_token and output_cost_per_token (USD; 0 for a model that costs nothing per token) -- "
                "the router weighs each model's quality against its cost"
            )


def check_port(host: str, port: int) -> None:
    """Refuse a port this host cannot listen on (another process holds it, or it needs privileges)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a port in TIME_WAIT is free
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise DeploymentError(f"--port {port}: cannot listen on {host}:{port} ({exc.strerror or exc})") from None


def check_embedder(settings: Settings) -> None:
    """Refuse an embedder that cannot load: a published encoder that is broken, another model's or not on
    CPU, or a model to load without torch/transformers installed."""
    import importlib.util

    from regret_gateway.encoders.embedder import TORCH_EXTRA_HINT, Embedder

    e = settings.embedder
    try:
        Embedder.from_settings(settings)  # its arguments checked, nothing loaded
    except ValueError as exc:
        raise DeploymentError(str(exc)) from None
    if e.exported is not None and e.kind == "static":
        from regret_gateway.encoders.static import StaticError, read_static

        try:
            read_static(e.exported, model=e.model, dims=e.static_dims)
        except StaticError as exc:
            raise DeploymentError(f"embedder.exported: {exc}") from None
    elif e.exported is not None:
        from regret_gateway.encoders.exported import ExportError, read_exported

        if importlib.util.find_spec("onnxruntime") is None:
            raise DeploymentError("embedder.exported: a published ONNX encoder runs on ONNX Runtime: pip install "
                                  "'regret-gateway[onnx]' (or publish and serve the static encoder: `export-encoder --kind static`)")  # fmt: skip
        try:
            read_exported(e.exported, model=e.model, layers=e.layers, quantize=e.quantize)
        except ExportError as exc:
            raise DeploymentError(str(exc)) from None
    elif not all(importlib.util.find_spec(m) for m in ("torch", "transformers")):
        what = "distilling the static encoder of" if e.kind == "static" else "loading"
        raise DeploymentError(f"embedder.model: {what} {e.model!r} needs torch and transformers: {TORCH_EXTRA_HINT}")


def _unset(value: object) -> str | None:
    """The variable an ``os.environ/VAR`` value names, if it is not set (or empty)."""
    var = env_var(value)
    return var if var is not None and not os.environ.get(var) else None


def _check_environment(settings: Settings, general: dict) -> None:
    var = _unset(general.get("master_key"))
    if var is not None:
        raise DeploymentError(f"general_settings.master_key: set {var} (the proxy's admin key, e.g. sk-<32 random characters>)")
    missing = [f"{var} (team {team})" for key, team in settings.api_keys.items() if (var := _unset(key)) is not None]
    if missing:
        raise DeploymentError(f"regret_gateway.api_keys: set {', '.join(missing)}, or remove the entry: a team key is the one "
                              "its clients send as their API key")  # fmt: skip


def _check_models(settings: Settings, model_list: object) -> None:
    if not isinstance(model_list, list) or not model_list:
        raise DeploymentError("model_list: the proxy config lists no models (the router picks among model_list's model_name)")
    names = {m.get("model_name") for m in model_list if isinstance(m, dict)}
    missing = [m for m in settings.models if m not in names]
    if missing:
        raise DeploymentError(
            f"regret_gateway.models: {missing} not a model_name of model_list (it has {sorted(map(str, names))})"
        )
    for judge in settings.judge.panel:
        if judge not in names:
            raise DeploymentError(f"regret_gateway.judge.model: {judge!r} is not a model_name of model_list")


def check_store_url(url: str) -> None:
    """Refuse a store URL the gateway could never write to: not a URL, another database, a driver that is
    not installed, an SQLite file in a folder that does not exist."""
    from sqlalchemy import create_engine, make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    key = "regret_gateway.store.url"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DeploymentError(f"{key}: {url!r} is not a database URL (e.g. sqlite:///regret-gateway.db)") from None
    backend = parsed.get_backend_name()
    shown = parsed.render_as_string(hide_password=True)
    if backend not in STORE_BACKENDS:
        raise DeploymentError(f"{key}: {shown!r}: the store is SQLite or PostgreSQL, not {backend!r}")
    try:
        create_engine(parsed).dispose()  # loads the dialect and imports its driver; connects to nothing
    except (NoSuchModuleError, ImportError) as exc:
        raise DeploymentError(f"{key}: {shown!r}: its driver is not installed ({type(exc).__name__}: {exc})") from None
    database = parsed.database if backend == "sqlite" else None
    if database and database != ":memory:" and not database.startswith("file:"):
        folder = Path(database).expanduser().resolve().parent
        if not folder.is_dir():
            raise DeploymentError(f"{key}: the folder of the SQLite file does not exist: {folder}")
