"""What the logs say happened, through `regret-gateway serve` as a real process: streamed answers (whole,
with and without the client asking for usage; closed by the client mid-stream) and a LiteLLM fallback
answering for the routed model. The mock upstream runs in this process and streams real server-sent events."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
import yaml
from fastapi import HTTPException
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from regret_gateway.bench.local import LocalServer, free_port, mock_upstream, proxy_config, serve_env, serve_process, wait_ready

pytestmark = pytest.mark.slow  # starts the LiteLLM proxy in a process of its own

MASTER = "sk-master-test-0123456789abcdef"
PRICES = {"a": (1e-6, 2e-6), "b": (2e-6, 4e-6), "c": (1e-5, 3e-5)}
WORDS, PROMPT_TOKENS = 20, 12  # each answer: 20 words (a chunk each), billed as 12 prompt and 20 completion tokens
KEYS = {"sk-streams": "streams", "sk-falls": "falls"}


def cost(model: str) -> float:
    p_in, p_out = PRICES[model]
    return PROMPT_TOKENS * p_in + WORDS * p_out


def respond(model: str, text: str) -> tuple[str, int, int]:
    if model == "c":
        raise HTTPException(status_code=500, detail="c is down")
    return " ".join(f"{model}{i}" for i in range(WORDS)), PROMPT_TOKENS, WORDS


HOLD, RELEASE = threading.Event(), threading.Event()  # HOLD set: a stream waits before its third chunk until RELEASE


async def pace(k: int) -> None:
    if k == 2 and HOLD.is_set():
        await asyncio.to_thread(RELEASE.wait, 60)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base url, store url): `serve` on a config whose tier `streams` goes to model a, and whose tier `falls`
    goes to model c -- which is down -- with a LiteLLM fallback from c to a."""
    tmp = tmp_path_factory.mktemp("serve-streams")
    upstream_port, port = free_port(), free_port()
    section = {
        "models": ["a", "b", "c"],
        "cold_start": "fallback",  # no router yet: each tier's fallback model, so each request's model is known
        "default_tier": "streams",
        "tiers": {"streams": {"lam": 0, "epsilon": 0, "fallback": "a"}, "falls": {"lam": 0, "epsilon": 0, "fallback": "c"}},
        "teams": {"streams": {"tier": "streams"}, "falls": {"tier": "falls"}},
        "api_keys": KEYS,
        "embedder": {"backend": "torch"},
        "store": {"url": f"sqlite:///{tmp}/gw.db", "spill_dir": str(tmp / "spill"), "flush_interval_s": 0.05},
        "artifacts_dir": str(tmp / "artifacts"),
    }
    cfg = proxy_config(section, PRICES, f"http://127.0.0.1:{upstream_port}/v1", custom_auth=True)
    cfg["router_settings"] = {"fallbacks": [{"c": ["a"]}], "num_retries": 0}
    (tmp / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = serve_env(MASTER)
    log = open(tmp / "serve.log", "w")  # noqa: SIM115 - closed below
    with LocalServer(mock_upstream(respond, pace), upstream_port):
        proc = serve_process(tmp / "config.yaml", port, env, log)
        try:
            wait_ready(port, proc)
            yield f"http://127.0.0.1:{port}", section["store"]["url"]
        finally:
            proc.terminate()
            proc.wait(60)
            log.close()


def body(stream: bool, **extra) -> dict:
    return {"model": "regret-router", "stream": stream, "messages": [{"role": "user", "content": "tell me"}], **extra}


def events(lines) -> list[dict]:
    return [json.loads(line[6:]) for line in lines if line.startswith("data: {")]


def logged(base: str, key: str, request_id: str, timeout: float = 60.0) -> dict:
    """The audit of ``request_id`` once its outcome is stored (the outcome follows the answer)."""
    deadline = time.monotonic() + timeout
    while True:
        r = httpx.get(f"{base}/regret/decisions/{request_id}", headers={"Authorization": f"Bearer {key}"}, timeout=10)
        if r.status_code == 200 and r.json()["outcome"] is not None:
            return r.json()
        assert time.monotonic() < deadline, f"no outcome for {request_id}: {r.status_code} {r.text[:300]}"
        time.sleep(0.1)


@pytest.mark.parametrize("client_asks_usage", [False, True])
def test_a_whole_stream_is_logged_with_its_cost_and_tokens(served, client_asks_usage):
    """A routed stream is logged at its model's price with its tokens, whether or not the client asked for
    usage (the OpenAI SDK's default does not); a client that did not ask gets no usage chunk."""
    base, _ = served
    extra = {"stream_options": {"include_usage": True}} if client_asks_usage else {}
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body(True, **extra),
                      headers={"Authorization": "Bearer sk-streams"}, timeout=60) as r:  # fmt: skip
        assert r.status_code == 200
        request_id, chunks = r.headers["x-regret-request-id"], events(r.iter_lines())
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == respond("a", "")[0]
    assert any("usage" in c and c["usage"] for c in chunks) == client_asks_usage
    outcome = logged(base, "sk-streams", request_id)["outcome"]
    assert outcome["status"] == "success" and outcome["answered_model"] == "a"
    assert (outcome["prompt_tokens"], outcome["completion_tokens"]) == (PROMPT_TOKENS, WORDS)
    assert outcome["cost_usd"] == pytest.approx(cost("a"))


def test_a_stream_the_client_leaves_is_logged_as_left_with_its_cost_and_out_of_training(served):
    base, store = served
    HOLD.set()
    RELEASE.clear()
    try:
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=body(True),
                          headers={"Authorization": "Bearer sk-streams"}, timeout=60) as r:  # fmt: skip
            request_id = r.headers["x-regret-request-id"]
            got = []
            for line in r.iter_lines():
                got += events([line])
                if len(got) == 2:
                    break  # the client leaves after 2 of 21 chunks
    finally:
        HOLD.clear()
        RELEASE.set()
    decision = logged(base, "sk-streams", request_id)
    outcome = decision["outcome"]
    assert outcome["status"] == "client_left", outcome
    # what LiteLLM billed for it: the upstream is released as the client leaves, so LiteLLM may have read the
    # whole stream before it saw the client go (a race of the two): never more than the stream held
    assert outcome["completion_tokens"] is None or outcome["completion_tokens"] <= WORDS
    # scored or not, it is no quality observation: retrain leaves it out
    r = httpx.post(f"{base}/regret/feedback", json={"request_id": request_id, "score": 1.0},
                   headers={"Authorization": "Bearer sk-streams"}, timeout=10)  # fmt: skip
    assert r.status_code == 200, r.text
    from regret_gateway.trainset.window import training_set

    engine = create_engine(store)
    with Session(engine) as session:
        ts = training_set(session, model_names=("a", "b", "c"))
    engine.dispose()
    assert request_id not in ts.request_ids and ts.skipped["client_left"] >= 1


@pytest.mark.parametrize("stream", [False, True])
def test_a_litellm_fallback_is_logged_as_the_model_that_answered(served, stream):
    """Routed to c, which is down; LiteLLM's fallback a answers. The client is told a answered, the outcome
    names a at a's price, budgets and per-model costs charge a, and retrain does not credit c with it."""
    base, store = served
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body(stream),
                      headers={"Authorization": "Bearer sk-falls"}, timeout=60) as r:  # fmt: skip
        assert r.status_code == 200
        request_id = r.headers["x-regret-request-id"]
        assert (r.headers["x-regret-model"], r.headers["x-regret-chosen-model"]) == ("a", "c")
        r.read()
    decision = logged(base, "sk-falls", request_id)
    assert decision["chosen_model"] == "c"
    outcome = decision["outcome"]
    assert outcome["status"] == "success" and outcome["answered_model"] == "a"
    assert outcome["cost_usd"] == pytest.approx(cost("a"))
    from datetime import datetime, timedelta, timezone

    from regret_gateway.store.steering import model_costs
    from regret_gateway.trainset.window import training_set

    engine = create_engine(store)
    with Session(engine) as session:
        ts = training_set(session, model_names=("a", "b", "c"))
        costs = model_costs(session, ["a", "b", "c"], datetime.now(timezone.utc) + timedelta(seconds=1))
    engine.dispose()
    assert request_id not in ts.request_ids and ts.skipped["answered_by_other"] >= 1
    assert "c" not in costs  # c never answered: no cost of its own


def scrape(base: str) -> dict[tuple[str, tuple], float]:
    """Every sample of `serve`'s /regret/metrics: (name, sorted labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    r = httpx.get(f"{base}/regret/metrics", headers={"Authorization": f"Bearer {MASTER}"}, timeout=10)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text[:300]
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(r.text) for s in f.samples}


def test_the_metrics_of_a_running_serve_move_with_its_traffic_and_only_the_admin_reads_them(served):
    """Prometheus scrapes `serve`: one request routed to c (down) and answered by LiteLLM's fallback a moves
    the tier's routed counter, c's chosen count, a's spend (the model that answered) and the hook's latency
    histogram by exactly that request; a team's key may not read them."""
    base, _ = served
    assert httpx.get(f"{base}/regret/metrics", headers={"Authorization": "Bearer sk-falls"}, timeout=10).status_code == 403
    before = scrape(base)
    r = httpx.post(f"{base}/v1/chat/completions", json=body(False), headers={"Authorization": "Bearer sk-falls"}, timeout=60)
    assert r.status_code == 200
    logged(base, "sk-falls", r.headers["x-regret-request-id"])  # the outcome is in: its spend is counted
    after = scrape(base)

    def moved(name: str, **labels) -> float:
        """How much the samples of ``name`` with these labels (among others) moved."""
        keys = [k for k in after if k[0] == name and set(labels.items()) <= set(k[1])]
        return sum(after[k] - before.get(k, 0.0) for k in keys)

    assert moved("regret_gateway_requests_total", tier="falls", outcome="routed") == 1
    assert moved("regret_gateway_requests_total", tier="falls") == 1  # one outcome a request: the outcomes sum to requests
    assert moved("regret_gateway_chosen_model_total", tier="falls", model="c") == 1
    assert moved("regret_gateway_spend_usd_total", team="falls", tier="falls", model="a") == pytest.approx(cost("a"))
    assert moved("regret_gateway_spend_usd_total", model="c") == 0
    assert moved("regret_gateway_hook_seconds_count") == 1 and moved("regret_gateway_hook_seconds_sum") > 0
    assert moved("regret_gateway_writer_records_total", result="written") >= 1
    assert after[("regret_gateway_router_info", (("version", "none"),))] == 1  # no router published yet


def test_the_savings_page_is_served_to_the_admin_only(served):
    """`GET /regret/report`: after a routed request, the admin's key gets the HTML page naming that team; a
    team's key gets 403; a window out of range 400."""
    base, _ = served
    r = httpx.post(f"{base}/v1/chat/completions", json=body(False), headers={"Authorization": "Bearer sk-streams"}, timeout=60)
    logged(base, "sk-streams", r.headers["x-regret-request-id"])
    admin = {"Authorization": f"Bearer {MASTER}"}
    page = httpx.get(f"{base}/regret/report", headers=admin, timeout=60)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), page.text[:300]
    assert "team streams (tier streams)" in page.text and "<svg" in page.text
    assert httpx.get(f"{base}/regret/report", headers={"Authorization": "Bearer sk-streams"}, timeout=10).status_code == 403
    assert httpx.get(f"{base}/regret/report", params={"days": 0}, headers=admin, timeout=10).status_code == 400
