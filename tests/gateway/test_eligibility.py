"""Which models can take a request (window, output, tools, images, JSON schema), where their limits come
from (LiteLLM's cost map, a deployment's model_info, the settings), and that the router draws among the
eligible models only, with propensities exact over them."""

from __future__ import annotations

import numpy as np
import pytest

from regret_gateway.config import Settings, TierSpec
from regret_gateway.gateway.decisions import ActiveRouter, fallback_model
from regret_gateway.gateway.eligibility import Eligibility, NoEligibleModel
from regret_gateway.gateway.model_info import group_info
from regret_gateway.limits import ModelInfo, Needs, refusal
from tests.gateway.conftest import CODE_PROMPT, MODELS

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def settings(**kw) -> Settings:
    tiers = {"t": TierSpec(lam=0.0, epsilon=0.2, fallback="large")}
    return Settings(models=MODELS, default_tier="t", tiers=tiers, **kw)


def test_needs_read_what_a_request_asks_of_a_model():
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "what is this?"}, IMAGE]}],
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
        "max_tokens": 900,
    }
    needs = Needs.of(body, 120, expected_output_tokens=256)
    assert (needs.tools, needs.images, needs.json_schema, needs.asked_output, needs.output_tokens) == (
        True,
        True,
        True,
        True,
        900,
    )
    plain = Needs.of({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}}, 5, 256)
    assert (plain.tools, plain.images, plain.json_schema, plain.asked_output, plain.output_tokens) == (
        False,
        False,
        False,
        False,
        256,
    )
    # max_completion_tokens is read before max_tokens; a bool or a negative count is no count
    assert Needs.of({"max_completion_tokens": 50, "max_tokens": 70}, 5, 256).output_tokens == 50
    assert Needs.of({"max_tokens": True}, 5, 256).output_tokens == 256


@pytest.mark.parametrize(
    ("info", "needs", "why"),
    [
        (ModelInfo(max_input_tokens=1000), Needs(800, 256, False), "window 1000 tokens"),
        (ModelInfo(max_input_tokens=1000), Needs(700, 256, False), None),
        (ModelInfo(max_input_tokens=1000), Needs(None, 256, False), None),  # not counted: not checked
        (ModelInfo(max_output_tokens=100), Needs(10, 200, True), "answers at most 100 tokens"),
        (ModelInfo(max_output_tokens=100), Needs(10, 256, False), None),  # the expected answer is no demand
        (ModelInfo(tools=False), Needs(10, 10, False, tools=True), "takes no tools"),
        (ModelInfo(tools=None), Needs(10, 10, False, tools=True), None),  # nobody says: not checked
        (ModelInfo(images=False), Needs(10, 10, False, images=True), "takes no images"),
        (ModelInfo(json_schema=False), Needs(10, 10, False, json_schema=True), "takes no a JSON schema"),
    ],
)
def test_a_model_refuses_only_what_its_known_limits_rule_out(info, needs, why):
    assert refusal(info, needs) == why


def test_model_info_is_litellms_under_the_deployment_under_the_settings():
    """A deployment's model_info wins over LiteLLM's cost map, the settings' model_info over both; over a
    group's deployments the strictest limit wins (any of them may answer)."""
    model_list = [
        {"model_name": "small-a", "litellm_params": {"model": "gpt-4o-mini"}},  # LiteLLM knows it: 128k, tools, images
        {"model_name": "small-a", "litellm_params": {"model": "gpt-4o-mini"}, "model_info": {"max_input_tokens": 8000}},
        {
            "model_name": "small-b",
            "litellm_params": {"model": "openai/unknown-x", "input_cost_per_token": 2e-6},
            "model_info": {"supports_vision": False},
        },  # fmt: skip
    ]
    s = settings(model_info={"small-b": {"tools": False}})
    info = group_info(model_list, s)
    assert info["small-a"].max_input_tokens == 8000 and info["small-a"].tools is True and info["small-a"].images is True
    assert info["small-b"] == ModelInfo(images=False, tools=False, input_cost_per_token=2e-6)
    assert info["large"] == ModelInfo()  # no deployment, no settings: nothing is checked
    # a cheaper deployment of a group does not make the group cheap; a model that lacks tools makes it lack them
    a, b = ModelInfo(tools=True, input_cost_per_token=1e-6), ModelInfo(tools=False, input_cost_per_token=3e-6)
    assert a.strictest(b) == ModelInfo(tools=False, input_cost_per_token=3e-6)


def test_settings_refuse_model_info_for_a_model_it_does_not_route():
    with pytest.raises(ValueError, match="model_info names models that are not in `models`"):
        settings(model_info={"gpt-9": {"tools": True}})


def test_eligibility_rules_out_the_models_that_cannot_take_a_request_and_says_why_when_none_can():
    s = settings(model_info={"small-a": {"max_input_tokens": 500}, "large": {"images": False}})
    e = Eligibility(s, group_info([], s))
    assert e.reads_size
    assert e.allowed(e.needs({"messages": []}, 100)) is None  # every model can: nothing restricted
    assert e.allowed(e.needs({"messages": []}, 400)).tolist() == [False, True, True]  # 400 + 256 > 500
    needs = e.needs({"messages": [{"role": "user", "content": [IMAGE]}]}, 400)
    assert e.allowed(needs).tolist() == [False, True, False]
    assert e.refusals(needs) == {"small-a": "window 500 tokens", "large": "takes no images"}
    err = NoEligibleModel(needs, {"small-a": "window 500 tokens"})
    assert "no model can take this request (400 prompt tokens + 256 for the answer, images)" in str(err)


def test_the_fallback_gives_way_to_a_model_that_can_take_the_request():
    s = settings()
    assert fallback_model(s, "t") == "large"
    assert fallback_model(s, "t", np.array([True, True, True])) == "large"
    assert fallback_model(s, "t", np.array([False, True, False])) == "small-b"


def test_the_draw_is_among_eligible_models_with_exact_propensities(trained_learner, encoder):
    """With a router and IGW exploration, a model ruled out is never drawn; the others' logged propensities
    are the probabilities they were drawn with (they sum to 1 over the eligible models), and the shares
    match them. The router's choice, when ruled out, goes to the eligible model it scores highest."""
    from regret_gateway.artifacts import RouterArtifact
    from regret_gateway.servable import PublishedRouter

    s = settings()
    estimator = trained_learner.nuisance_.outcome_.to_policy(MODELS)
    policy = trained_learner.policy_.to_policy()
    active = ActiveRouter(s)
    active.active.artifact = RouterArtifact("v", PublishedRouter.serving(policy, {"t": 0.0}, estimator=estimator), {"model": "m"})
    x = encoder([CODE_PROMPT])[0]
    free, best, _ = active.distribution(x[None, :], "t")
    allowed = np.ones(3, dtype=bool)
    allowed[best] = False  # the router's own choice cannot take it
    p, new_best, _ = active.distribution(x[None, :], "t", allowed=allowed)
    assert p[best] == 0 and p.sum() == pytest.approx(1.0) and new_best != best and allowed[new_best]
    rng = np.random.default_rng(0)
    choices = [active.choose(x, "t", rng, allowed=allowed) for _ in range(4000)]
    assert all(c.model != MODELS[best] for c in choices)
    for c in choices[:100]:
        assert c.propensity == pytest.approx(p[MODELS.index(c.model)])
    shares = np.bincount([MODELS.index(c.model) for c in choices], minlength=3) / len(choices)
    assert np.allclose(shares, p, atol=0.02)


def test_the_uniform_cold_start_stays_uniform_over_the_eligible_models(encoder):
    active = ActiveRouter(settings())
    rng = np.random.default_rng(0)
    x = encoder([CODE_PROMPT])[0]
    allowed = np.array([True, False, True])
    choices = [active.choose(x, "t", rng, allowed=allowed) for _ in range(400)]
    assert {c.model for c in choices} == {"small-a", "large"}
    assert all(c.propensity == pytest.approx(0.5) and c.mode == "cold_start" for c in choices)
