"""import-logs embeds each historical prompt the way the gateway embeds a live one: inside the configured
context template, filled from the row's columns."""

import numpy as np
import pandas as pd

from regret_gateway.config import Settings
from regret_gateway.importer import read_logs


def test_imported_prompts_are_embedded_inside_the_context_template(tmp_path):
    settings = Settings.model_validate(
        {
            "models": ["a", "b"],
            "tiers": {"standard": {"lam": 0}, "gold": {"lam": 0}},
            "embedder": {"template": "{team}|{tier}|{tags}: {prompt}"},
            "artifacts_dir": str(tmp_path / "artifacts"),  # where the prompt-hash key is created
        }
    )
    pd.DataFrame(
        {
            "prompt": ["p1", "p2"],
            "model": ["a", "b"],
            "quality": [1.0, 0.0],
            "cost_usd": [0.1, 0.2],
            "team": ["t1", None],
            "tier": [None, "gold"],
        }
    ).to_csv(tmp_path / "logs.csv", index=False)
    seen: list[str] = []

    def encode(texts):
        seen.extend(texts)
        return np.ones((len(texts), 3), dtype=np.float32)

    pairs = read_logs(tmp_path / "logs.csv", settings, encode)
    assert seen == ["t1|standard|unknown: p1", "unknown|gold|unknown: p2"]
    assert {d.embedding_model for d, _ in pairs} == {settings.embedder.embedding_id}
    assert [d.prompt_hash != "" for d, _ in pairs] == [True, True]


def test_imported_rows_carry_the_code_of_their_context_like_live_requests(tmp_path):
    """With `embedder.context`, an imported row's embedding is followed by the code of its context columns,
    the features the gateway logs for a live request with the same tags (prompt or x-columns alike)."""
    from regret_gateway.context import ContextCode

    settings = Settings.model_validate(
        {"models": ["a", "b"], "embedder": {"context": "{tags}", "context_dim": 4}, "artifacts_dir": str(tmp_path / "artifacts")}
    )
    frame = {"model": ["a", "b"], "quality": [1.0, 0.0], "cost_usd": [0.1, 0.2], "tags": ["code", None]}
    pd.DataFrame({"prompt": ["p1", "p2"], **frame}).to_csv(tmp_path / "prompts.csv", index=False)
    pd.DataFrame({"x0": [1.0, 1.0], "x1": [1.0, 1.0], "x2": [1.0, 1.0], **frame}).to_csv(tmp_path / "x.csv", index=False)
    codes = ContextCode("{tags}", dim=4).codes(["code", "unknown"])
    for name in ("prompts.csv", "x.csv"):
        pairs = read_logs(tmp_path / name, settings, lambda texts: np.ones((len(texts), 3), dtype=np.float32))
        X = np.stack([d.embedding for d, _ in pairs])
        assert X.shape == (2, 7)
        np.testing.assert_array_equal(X[:, 3:], codes)


def test_with_the_size_feature_imported_and_live_requests_carry_the_prompts_size(tmp_path):
    """`embedder.size_feature`: an imported row's features end with its prompt's size, the same value the
    gateway appends for a live request with that prompt; the logs are another embedding's (their own id); a
    file of x-columns without prompts cannot be sized and is refused in one line."""
    import pytest

    from regret_gateway.context import SizeFeature
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.store.records import StoreInputError
    from regret_gateway.tokens import count_tokens

    settings = Settings.model_validate(
        {
            "models": ["a", "b"],
            "embedder": {"size_feature": True},
            "artifacts_dir": str(tmp_path / "artifacts"),
            "store": {"url": f"sqlite:///{tmp_path}/gw.db", "spill_dir": str(tmp_path / "spill")},
        }  # fmt: skip
    )
    prompts = ["what is 2 + 2?", "summarise this: " + "lorem ipsum dolor " * 400]
    frame = {"model": ["a", "b"], "quality": [1.0, 0.0], "cost_usd": [0.1, 0.2]}
    pd.DataFrame({"prompt": prompts, **frame}).to_csv(tmp_path / "prompts.csv", index=False)
    pairs = read_logs(tmp_path / "prompts.csv", settings, lambda texts: np.ones((len(texts), 3), dtype=np.float32))
    X = np.stack([d.embedding for d, _ in pairs])
    assert X.shape == (2, 4) and X[1, 3] > X[0, 3] > 0
    np.testing.assert_allclose(X[:, 3], SizeFeature().values(count_tokens(prompts))[:, 0])
    gateway = Gateway(settings, encode=lambda texts: np.ones((len(texts), 3), dtype=np.float32))
    np.testing.assert_array_equal(gateway.features(np.ones(3, dtype=np.float32), None, prompts[1]), X[1])
    assert settings.embedder.embedding_id.endswith("+size-1") and {d.embedding_model for d, _ in pairs} == {
        settings.embedder.embedding_id
    }
    pd.DataFrame({"x0": [1.0, 1.0], **frame}).to_csv(tmp_path / "x.csv", index=False)
    with pytest.raises(StoreInputError, match="needs a prompt column"):
        read_logs(tmp_path / "x.csv", settings, lambda texts: np.ones((len(texts), 3), dtype=np.float32))
