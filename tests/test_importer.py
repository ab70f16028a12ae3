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
