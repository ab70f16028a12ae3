"""A small routing world with real MiniLM embeddings, a trained router artifact, and the LiteLLM proxy
in-process (TestClient) with upstream models mocked by respx.

World: prompts of two families. 'small-a' answers code prompts well (0.9) and translations badly (0.2),
'small-b' the reverse, 'large' both (0.95) at 20x the price. So premium (lambda 0) should go to 'large',
economy (lambda 1000) to the right small model for the family.
"""

from __future__ import annotations

import os

os.environ.setdefault("DISABLE_AIOHTTP_TRANSPORT", "True")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MASTER_KEY", "sk-master-test-0123456789abcdef")

import numpy as np
import pytest

from regret_gateway.data import FullFeedback

MODELS = ("small-a", "small-b", "large")
PRICE = {"small-a": 1e-6, "small-b": 1e-6, "large": 2e-5}  # USD per token, in and out
USAGE = {"prompt_tokens": 40, "completion_tokens": 10}
KEYS = {"research": "sk-research-1", "support": "sk-support-1", "other": "sk-other-1"}

_CODE = [
    "Write a Python function that {}.",
    "Fix the bug in this JavaScript code that {}.",
    "Implement in Rust a routine that {}.",
    "Write a SQL query that {}.",
    "Refactor this Java class so that it {}.",
]
_CODE_TASKS = [
    "sorts a list of integers",
    "parses a CSV file",
    "reverses a linked list",
    "computes a moving average",
    "merges two dictionaries",
    "validates an email address",
    "counts word frequencies",
    "finds duplicate rows",
]
_TRANSLATE = [
    "Translate into French: '{}'",
    "Translate this sentence to German: {}",
    "How do you say '{}' in Spanish?",
    "Give me the Italian translation of: {}",
    "Translate to Portuguese please: {}",
]
_PHRASES = [
    "the weather is lovely today",
    "where is the train station",
    "I would like a cup of coffee",
    "my brother lives in the mountains",
    "the meeting starts at noon",
    "thank you for your help",
    "the museum is closed on Mondays",
    "we are going to the beach",
]


def prompts() -> tuple[list[str], np.ndarray]:
    """(texts, family) with family 0 = code, 1 = translation."""
    texts, family = [], []
    for t in _CODE:
        for x in _CODE_TASKS:
            texts.append(t.format(x))
            family.append(0)
    for t in _TRANSLATE:
        for x in _PHRASES:
            texts.append(t.format(x))
            family.append(1)
    return texts, np.array(family)


CODE_PROMPT = "Write a Go function that checks whether a string is a palindrome."
TRANSLATE_PROMPT = "Translate into French: 'the library opens at nine'"


def request_cost(model: str) -> float:
    return PRICE[model] * (USAGE["prompt_tokens"] + USAGE["completion_tokens"])


@pytest.fixture(scope="session")
def prompt_world(encoder) -> FullFeedback:
    texts, family = prompts()
    reps = 4  # each prompt 4 times with independent outcomes: 320 rows
    X = np.repeat(encoder(texts), reps, axis=0)
    fam = np.repeat(family, reps)
    rng = np.random.default_rng(0)
    p = np.stack([np.where(fam == 0, 0.9, 0.2), np.where(fam == 0, 0.2, 0.9), np.full(len(fam), 0.95)], axis=1)
    quality = (rng.random(p.shape) < p).astype(float)
    cost = np.tile([request_cost(m) for m in MODELS], (len(fam), 1))
    return FullFeedback(X=X, quality=quality, cost=cost, model_names=MODELS)


@pytest.fixture(scope="session")
def trained_router(trained_learner):
    """RM-Interval on simulated uniform logs of the world, tiers at lambda 0, 200, 1000."""
    return trained_learner.policy_


@pytest.fixture(scope="session")
def trained_learner(prompt_world):
    """The fitted learner behind ``trained_router`` (its nuisance stage holds R&C's outcome networks)."""
    from regret_gateway.causal.estimators import DoublyRobust, Nuisance
    from regret_gateway.causal.outcome import OutcomeModel
    from regret_gateway.causal.propensity import LoggedPropensity
    from regret_gateway.evaluation.simulation import simulate_logs
    from regret_gateway.nn.training import TrainConfig
    from regret_gateway.policy.learner import Learner
    from regret_gateway.policy.rm_interval import RMInterval

    logs = simulate_logs(prompt_world, policy="uniform", seed=0)
    idx = np.random.default_rng(1).permutation(logs.n_samples)
    tr, va = logs.subset(idx[:260]), logs.subset(idx[260:])
    fast = TrainConfig(max_epochs=300, patience=30)
    nuisance = Nuisance(
        propensity=LoggedPropensity(), outcome=OutcomeModel(train=fast), estimator=DoublyRobust(clip_scope="global")
    )
    learner = Learner(nuisance=nuisance, policy=RMInterval(tiers=[0.0, 200.0, 1000.0], train=fast, hidden=(64, 64)))
    return learner.fit(tr, va, [0.0, 200.0, 1000.0])
