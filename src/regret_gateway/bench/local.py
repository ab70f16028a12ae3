"""Local proxies for benchmarks, the demo and tests: ASGI apps on local ports in background threads, a
mock upstream that answers OpenAI chat completions with whatever a ``respond(model, prompt)`` function
returns, and the LiteLLM proxy config that puts the regret-gateway hook in front of it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """``with LocalServer(app, port): ...`` -- uvicorn in a daemon thread, started and stopped cleanly."""

    def __init__(self, app, port: int):
        import uvicorn

        self.port = port
        # keep-alive longer than a retrain between rounds: at uvicorn's 5 s the server closes the clients' pooled
        # connections while they sit idle, and a request racing that close fails with "Server disconnected"
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_keep_alive=600)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "LocalServer":
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"server on port {self.port} did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def serve_env(master_key: str) -> dict[str, str]:
    """This process's environment for a ``serve`` process of a test or benchmark: ``master_key`` as LiteLLM's
    master key, LiteLLM's bundled cost map (no network), httpx as its transport (what respx sees)."""
    return {**os.environ, "LITELLM_MASTER_KEY": master_key, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "DISABLE_AIOHTTP_TRANSPORT": "True"}  # fmt: skip


def serve_process(config: str | Path, port: int, env: dict, output=subprocess.PIPE) -> subprocess.Popen:
    """``regret-gateway serve --config CONFIG`` on 127.0.0.1:``port`` in a process of its own (this Python),
    stdout and stderr to ``output`` (a pipe of text by default, or an open file)."""
    args = [sys.executable, "-m", "regret_gateway", "serve", "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen(args, env=env, stdout=output, stderr=subprocess.STDOUT, text=True)


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 240.0) -> None:
    """Return once the proxy on ``port`` answers its liveness probe; RuntimeError if ``proc`` exits first
    (with its output's tail where it writes to a pipe) or ``timeout`` seconds pass."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = proc.stdout.read()[-4000:] if proc.stdout is not None else ""
            raise RuntimeError(f"proxy on {port} exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health/liveliness", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"proxy on {port} did not start in {timeout:g}s")


HOG_MAX_S = 3600.0  # a CPU hog stops by itself after this long, whatever happens to the run that started it


@contextmanager
def cpu_hogs(n: int, max_seconds: float = HOG_MAX_S) -> Iterator[list[subprocess.Popen]]:
    """``n`` processes that keep a core busy each (a tight loop), for as long as the ``with`` block runs (and
    at most ``max_seconds``): a benchmark beside other work that takes the machine's CPU."""
    code = f"import time\nend = time.monotonic() + {float(max_seconds)}\nwhile time.monotonic() < end:\n    pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]  # fmt: skip
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait(10)


def mock_upstream(respond: Callable[[str, str], tuple[str, int, int]],
                  pace: Callable[[int], Awaitable[None]] | None = None) -> FastAPI:  # fmt: skip
    """An OpenAI-compatible upstream: ``respond(model, last_user_text) -> (content, prompt_tokens,
    completion_tokens)``. A ``stream: true`` request is answered as OpenAI streams: server-sent events, one
    chunk per word of the content, a last chunk with the finish reason, then (where the request asks for it
    with ``stream_options.include_usage``) a usage chunk, then ``[DONE]``. ``pace(k)`` is awaited before the
    k-th chunk (a test holds a stream open there)."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request):
        body = await request.json()
        messages = body.get("messages") or [{}]
        text = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
        content, prompt_tokens, completion_tokens = respond(body["model"], text if isinstance(text, str) else str(text))
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip
        head = {"id": f"chatcmpl-{time.time_ns()}", "created": int(time.time()), "model": body["model"]}
        if body.get("stream") is True:
            with_usage = isinstance(body.get("stream_options"), dict) and body["stream_options"].get("include_usage") is True
            return StreamingResponse(_sse(head, content, usage if with_usage else None, pace), media_type="text/event-stream")
        return {
            **head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage,
        }

    return app


async def _sse(head: dict, content: str, usage: dict | None, pace: Callable[[int], Awaitable[None]] | None):
    """The server-sent events of a streamed chat completion (see :func:`mock_upstream`)."""
    words = content.split(" ")
    deltas = [{"role": "assistant", "content": words[0]}, *({"content": " " + w} for w in words[1:])]
    chunks = [{**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
              for d in deltas]  # fmt: skip
    chunks.append({**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage is not None:
        chunks.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    for k, chunk in enumerate(chunks):
        if pace is not None:
            await pace(k)
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def proxy_config(
    regret_gateway: dict,
    prices: dict[str, tuple[float, float]],
    api_base: str,
    *,
    custom_auth: bool = False,
    api_key: str = "sk-upstream",
) -> dict:
    """A LiteLLM proxy config (the dict behind config.yaml).

    Args:
        regret_gateway: the ``regret_gateway:`` section (see :mod:`regret_gateway.config`).
        prices: model -> (input, output) cost per token; one OpenAI-compatible deployment per model.
        api_base: where every deployment is served (``http://127.0.0.1:PORT/v1`` for :func:`mock_upstream`).
        custom_auth: authenticate with the section's ``api_keys`` (no LiteLLM key database needed).
        api_key: the upstream key LiteLLM sends.
    """
    general = {"master_key": "os.environ/LITELLM_MASTER_KEY"}
    if custom_auth:
        general["custom_auth"] = "regret_gateway.gateway.auth.user_api_key_auth"
    return {
        "model_list": [
            {
                "model_name": m,
                "litellm_params": {
                    "model": f"openai/{m}",
                    "api_base": api_base,
                    "api_key": api_key,
                    "input_cost_per_token": p_in,
                    "output_cost_per_token": p_out,
                },
            }
            for m, (p_in, p_out) in prices.items()
        ],
        "litellm_settings": {"callbacks": ["regret_gateway.gateway.hook.handler"]},
        "general_settings": general,
        "regret_gateway": regret_gateway,
    }


MOCK_PRICES = (1e-6, 2e-6)  # USD per input / output token where LiteLLM's cost map does not know the model


def echo_response(model: str, text: str) -> tuple[str, int, int]:
    """The mock upstream of ``serve --mock-upstream``: names the model and echoes the prompt's start; a token
    per word in, 20 out."""
    return f"[{model}, a mock answer] {text[:200]}", max(1, len(text.split())), 20


def mock_deployment(config: dict, api_base: str) -> dict:
    """``config`` (a LiteLLM proxy config) with every deployment of its ``model_list`` sent to the mock
    upstream at ``api_base`` under its own ``model_name``, priced as LiteLLM prices the real model (its
    bundled cost map), else at :data:`MOCK_PRICES`: the router and its logs see the real models' costs,
    and no provider key is needed. Its ``regret_gateway:`` section says ``mock_upstream: true``: every
    decision is marked as a mock's answer, which retrain and budgets leave out."""
    from regret_gateway.gateway import bundled_cost_map

    bundled_cost_map()
    import litellm

    deployments = []
    for entry in config.get("model_list") or []:
        params = dict(entry.get("litellm_params") or {})
        try:
            info = litellm.get_model_info(str(params.get("model", "")))
            p_known = (info.get("input_cost_per_token"), info.get("output_cost_per_token"))
        except Exception:  # noqa: BLE001 -- unknown to the cost map: the default prices
            p_known = (None, None)
        prices = tuple(MOCK_PRICES[k] if p is None else float(p) for k, p in enumerate(p_known))
        p_in = params.get("input_cost_per_token", prices[0])
        p_out = params.get("output_cost_per_token", prices[1])
        mocked = {"model": f"openai/{entry['model_name']}", "api_base": api_base, "api_key": "sk-mock",
                  "input_cost_per_token": p_in, "output_cost_per_token": p_out}  # fmt: skip
        deployments.append({**entry, "litellm_params": mocked})
    section = config.get("regret_gateway")
    marked = {"regret_gateway": {**section, "mock_upstream": True}} if isinstance(section, dict) else {}
    return {**config, "model_list": deployments, **marked}
