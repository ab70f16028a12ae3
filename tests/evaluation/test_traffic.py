"""Chat-shaped traffic (``bench offline --traffic chat``): prompts placed into apps, conversations, tools and
long requests, and an offline run that never sends a request to a model that cannot take it."""

from __future__ import annotations

import numpy as np

from regret_gateway.evaluation.loaders import Benchmark
from regret_gateway.evaluation.offline import OfflineConfig, restrict, run_offline
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.evaluation.traffic import APPS, SMALL_WINDOW, chat_traffic, model_limits
from regret_gateway.tokens import count_message_tokens, count_tokens
from tests.conftest import make_world
from tests.evaluation.test_offline_dev import _bench

TASKS = ("math", "code", "law", "trivia")


def bench(n: int = 400) -> Benchmark:
    rng = np.random.default_rng(0)
    groups = np.array([TASKS[i % 4] for i in range(n)])
    return Benchmark(
        prompts=[f"Question {i} about {groups[i]}: " + "words " * int(rng.integers(5, 60)) for i in range(n)],
        quality=rng.random((n, 3)), cost=np.tile([1e-6, 1e-5, 1e-4], (n, 1)), model_names=("cheap", "mid", "dear"),
        split=np.array(["train"] * (n - 50) + ["test"] * 50), groups=groups, sample_ids=[str(i) for i in range(n)],
        source="synthetic",
    )  # fmt: skip


def test_apps_have_long_system_prompts_of_300_to_3000_tokens():
    sizes = count_tokens([a.system for a in APPS])
    assert sizes.min() >= 300 and sizes.max() <= 3000 and len({a.name for a in APPS}) == len(APPS) == 8


def test_each_prompt_becomes_a_request_of_an_app_correlated_with_its_task():
    b = bench()
    chat = chat_traffic(b, seed=1, long_share=0.05)
    assert chat.n_samples == b.n_samples
    for i, messages in enumerate(chat.messages):
        assert messages[0]["role"] == "system" and messages[-1] == {"role": "user", "content": b.prompts[i]}
        assert next(a for a in APPS if a.name == chat.apps[i]).system == messages[0]["content"]
        assert chat.later[i] == any(m["role"] == "assistant" for m in messages)
    # the app follows the task (its home app) most of the time, not always
    home = np.mean([chat.apps[b.groups == t].tolist().count(max(set(chat.apps[b.groups == t]), key=chat.apps[b.groups == t].tolist().count))
                    / (b.groups == t).sum() for t in TASKS])  # fmt: skip
    assert 0.6 < home < 0.95
    assert 0.25 < chat.later.mean() < 0.5
    assert all(t == [] or {d["function"]["name"] for d in t} for t in chat.tools) and any(chat.tools)
    # sizes are the conversation's tokens as LiteLLM counts them (to a few tokens of message overhead)
    for i in range(0, 400, 37):
        assert abs(int(chat.prompt_tokens[i]) - count_message_tokens(chat.messages[i])) <= 8
    # the long requests do not fit the cheapest model's window; tool requests rule out the second cheapest
    limits = model_limits(b)
    assert limits["cheap"].max_input_tokens == SMALL_WINDOW and limits["mid"].tools is False
    too_long = chat.prompt_tokens + 256 > SMALL_WINDOW
    assert too_long.any()
    np.testing.assert_array_equal(chat.eligible[:, 0], ~too_long)
    np.testing.assert_array_equal(chat.eligible[:, 1], np.array([not t for t in chat.tools]))
    assert chat.eligible[:, 2].all()
    again = chat_traffic(b, seed=1, long_share=0.05)
    assert again.messages == chat.messages  # the seed fixes it


def test_logs_are_drawn_among_eligible_models_with_exact_propensities():
    full = make_world(n=300, seed=0)
    eligible = np.ones((300, full.n_models), dtype=bool)
    eligible[::3, 0] = False
    logs = simulate_logs(full, seed=0, draws=2, eligible=eligible)
    rows = np.repeat(np.arange(300), 2)
    assert eligible[rows, logs.action].all()
    plain = simulate_logs(full, seed=0, draws=2)
    assert (plain.action[rows % 3 == 0] == 0).any()  # without the mask model 0 would be drawn there
    assert np.all(logs.propensity[rows % 3 != 0] == plain.propensity[rows % 3 != 0])


def test_restrict_moves_only_ineligible_choices_to_the_first_eligible_model_of_the_order():
    actions = np.array([[0, 1, 2, 0]])
    eligible = np.array([[True, True, True], [True, False, True], [True, True, True], [False, False, True]])
    order = np.array([[1, 0, 2]])
    np.testing.assert_array_equal(restrict(actions, eligible, order), [[0, 0, 2, 2]])
    assert restrict(actions, None, order) is actions


def test_an_offline_run_sends_no_prompt_to_a_model_that_cannot_take_it():
    """The large model cannot take the code prompts: the oracle and every method score as if they chose among
    the models that can, and the share each would have sent there is reported."""
    b, X = _bench()
    code = X[:, 0] == 1.0
    eligible = np.ones((b.n_samples, 2), dtype=bool)
    eligible[~code, 1] = False  # the large model takes none of the non-code prompts
    config = OfflineConfig(trials=1, methods=("full-info-regression",), lambdas=(0.0, 1.0, 2.0), outcome_preset="fast",
                           propensity="logged", served_cross_fit=False)  # fmt: skip
    free = run_offline(b, X, config, progress=False)
    run = run_offline(b, X, config, progress=False, eligible=eligible)
    test = b.split == "test"
    small_only = 100 * np.where(code[test], np.maximum(b.quality[test, 0], b.quality[test, 1]), b.quality[test, 0]).mean()
    assert run.methods["oracle"].utility[0][0] == small_only < free.methods["oracle"].utility[0][0]
    assert run.diagnostics[0]["ineligible_full-info-regression"] > 0  # it would have sent some there
