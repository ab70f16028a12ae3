"""The ONNX Runtime encoder: exported once from the bundled MiniLM, verified against torch, cached; an
export that fails or disagrees keeps torch, says why, and is not retried on every start."""

import os
from pathlib import Path

import numpy as np
import pytest

from regret_gateway.encoders import onnx_runtime as onnx_encoder
from regret_gateway.encoders.embedder import Embedder

PROMPTS = [
    "Write a Go function that checks whether a string is a palindrome.",
    "Translate into French: 'the library opens at nine'",
    "What is the capital of Australia?",
    "Summarise this: " + "the meeting moved to Thursday because the room was booked. " * 12,
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(cache folder, embedder on ONNX) -- one export for the module."""
    cache = tmp_path_factory.mktemp("onnx")
    embedder = Embedder(device="cpu", kind="transformer", onnx_cache=cache, progress=False)
    embedder.encode(["load"])
    return cache, embedder


@pytest.fixture(scope="module")
def torch_embedder():
    return Embedder(device="cpu", kind="transformer", backend="torch", progress=False)


@pytest.mark.slow
def test_the_onnx_encoder_agrees_with_torch_and_loads_from_its_cache_without_torch(exported, torch_embedder, monkeypatch):
    cache, embedder = exported
    assert embedder.backend_used == "onnx"
    report = embedder.backend_report
    assert report["status"] == "verified" and report["cosine"] >= onnx_encoder.MIN_COSINE
    a, b = embedder.encode(PROMPTS), torch_embedder.encode(PROMPTS)
    assert torch_embedder.backend_used == "torch"
    assert (a * b).sum(1).min() >= 0.9999 and np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)

    import transformers

    def no_torch_model(*args, **kwargs):
        raise AssertionError("a cached export must not load the torch model")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", no_torch_model)
    again = Embedder(device="cpu", kind="transformer", onnx_cache=cache, progress=False)
    assert np.allclose(again.encode(PROMPTS), a, atol=1e-6) and again.backend_used == "onnx"


@pytest.mark.slow
def test_the_default_export_is_the_fused_graph(exported):
    """MiniLM's export fuses every layer's attention into one ONNX Runtime ``Attention`` op (and its layer
    norms): fewer, larger ops than the plain graph, the same embedding (agreement asserted above)."""
    import onnx

    report = exported[1].backend_report
    assert report["graph"] == "fused" and "fusion" not in report
    ops = [n.op_type for n in onnx.load(report["path"]).graph.node]
    assert ops.count("Attention") == 6 and ops.count("SkipLayerNormalization") == 12 and len(ops) < 80


@pytest.mark.slow
def test_a_graph_that_cannot_be_fused_is_served_plain_and_says_why(torch_embedder, tmp_path, monkeypatch):
    def unfusable(encoder, tokenizer, target):
        raise ValueError("ONNX Runtime's optimiser fused the attention of 0 of 6 layers")

    monkeypatch.setattr(onnx_encoder, "_export_fused", unfusable)
    embedder = Embedder(device="cpu", kind="transformer", onnx_cache=tmp_path, progress=False)
    a = embedder.encode(PROMPTS)
    report = embedder.backend_report
    assert embedder.backend_used == "onnx" and report["status"] == "verified" and report["graph"] == "plain"
    assert "0 of 6 layers" in report["fusion"]
    assert (a * torch_embedder.encode(PROMPTS)).sum(1).min() >= 0.9999
    assert sorted(p.name for p in Path(report["path"]).parent.iterdir()) == ["export.json", "model.onnx"]  # nothing left over


@pytest.mark.slow
def test_configured_threads_reach_the_onnx_session_and_zero_is_refused(exported, tmp_path):
    from regret_gateway.config import Settings

    cache, _ = exported
    base = {
        "models": ["a", "b"],
        "artifacts_dir": str(tmp_path),
        "embedder": {"kind": "transformer", "device": "cpu", "onnx_cache": str(cache)},
    }
    default = Embedder.from_settings(Settings.model_validate(base))
    default.encode(["load"])
    assert default.threads is None and default._onnx.session.get_session_options().intra_op_num_threads == 0  # ORT's own
    one = Embedder.from_settings(Settings.model_validate({**base, "embedder": {**base["embedder"], "threads": 1}}))
    one.encode(["load"])
    assert one._onnx.session.get_session_options().intra_op_num_threads == 1
    for embedder in (default, one):  # idle workers sleep instead of spinning on the proxy's cores
        assert embedder._onnx.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert np.allclose(one.encode(PROMPTS), default.encode(PROMPTS), atol=1e-5)
    # a busy pass (back to back, under load) runs the same graph on half the cores, unless threads were chosen
    assert np.allclose(default.encode(PROMPTS, busy=True), default.encode(PROMPTS), atol=1e-5)
    half = max(1, (os.cpu_count() or 2) // 2)
    assert default.busy_threads == half and default._onnx_busy.session.get_session_options().intra_op_num_threads == half
    assert (
        one.busy_threads is None
        and one._onnx_busy is None
        and np.array_equal(one.encode(PROMPTS, busy=True), one.encode(PROMPTS))
    )
    with pytest.raises(ValueError, match="threads"):
        Settings.model_validate({**base, "embedder": {**base["embedder"], "threads": 0}})


@pytest.mark.slow
def test_a_refused_export_keeps_torch_says_why_and_is_not_redone(exported, torch_embedder, tmp_path, monkeypatch):
    """An export whose embeddings disagree with torch's beyond the threshold is refused (here: a threshold
    no export can meet, the exported graph reused to save minutes)."""
    verified_model = exported[1].backend_report["path"]
    calls = []

    def reuse(encoder, tokenizer, target, graph, quantize):
        calls.append(target)
        target.write_bytes(open(verified_model, "rb").read())

    monkeypatch.setattr(onnx_encoder, "_export", reuse)
    monkeypatch.setattr(onnx_encoder, "MIN_COSINE", 1.5)
    refused = Embedder(device="cpu", kind="transformer", onnx_cache=tmp_path, progress=False)
    assert np.allclose(refused.encode(PROMPTS), torch_embedder.encode(PROMPTS), atol=1e-6)
    assert refused.backend_used == "torch" and refused.backend_report["status"] == "refused"
    assert "need >= 1.5" in refused.backend_report["reason"] and len(calls) == 2  # the fused graph, then the plain one
    later = Embedder(device="cpu", kind="transformer", onnx_cache=tmp_path, progress=False)
    later.encode(["x"])
    assert later.backend_used == "torch" and len(calls) == 2  # the refusal is cached with its reason


@pytest.mark.slow
def test_a_shallower_encoder_has_its_own_verified_export(exported, tmp_path):
    """``layers=N``: the first N layers are exported on their own (beside the full model's, never instead of
    it), verified against torch at the same depth."""
    cache, full = exported
    shallow = Embedder(device="cpu", kind="transformer", layers=2, onnx_cache=cache, progress=False)
    torch_shallow = Embedder(device="cpu", kind="transformer", backend="torch", layers=2, progress=False)
    a, b = shallow.encode(PROMPTS), torch_shallow.encode(PROMPTS)
    assert shallow.backend_used == "onnx" and shallow.backend_report["status"] == "verified"
    assert (a * b).sum(1).min() >= 0.9999
    assert shallow.backend_report["path"] != full.backend_report["path"]
    assert len([p for p in cache.iterdir() if (p / "export.json").is_file()]) >= 2
    assert (a * full.encode(PROMPTS)).sum(1).max() < 0.9


@pytest.mark.slow
@pytest.mark.parametrize("tampering", ["replaced", "link out", "no checksum"])
def test_a_cached_graph_that_is_not_the_verified_one_is_exported_again(exported, tmp_path, monkeypatch, tampering):
    """A cached ``model.onnx`` is served only if it is the graph that was verified (its SHA-256 in
    ``export.json``) and a file of the cache folder itself: another graph, a link to one outside the folder
    (even the same bytes) or a report without its checksum is removed and exported again (here: the export
    reuses the verified bytes, to save minutes)."""
    import json
    import shutil

    cache, genuine = exported
    verified = Path(genuine.backend_report["path"])
    folder = tmp_path / "cache" / verified.parent.name
    shutil.copytree(verified.parent, folder)
    graph = folder / "model.onnx"
    if tampering == "replaced":
        graph.write_bytes(os.urandom(4096))
    elif tampering == "link out":
        outside = tmp_path / "outside.onnx"
        shutil.copy(verified, outside)
        graph.unlink()
        graph.symlink_to(outside)
    else:
        report = json.loads((folder / "export.json").read_text())
        report.pop("files")
        (folder / "export.json").write_text(json.dumps(report))
    exports = []

    def reuse(encoder, tokenizer, target, graph_kind, quantize):
        exports.append(graph_kind)
        target.write_bytes(verified.read_bytes())

    monkeypatch.setattr(onnx_encoder, "_export", reuse)
    healed = Embedder(device="cpu", kind="transformer", onnx_cache=tmp_path / "cache", progress=False)
    assert np.allclose(healed.encode(PROMPTS), genuine.encode(PROMPTS), atol=1e-6)
    assert healed.backend_used == "onnx" and exports == ["fused"]
    assert not graph.is_symlink() and graph.read_bytes() == verified.read_bytes()
    again = Embedder(device="cpu", kind="transformer", onnx_cache=tmp_path / "cache", progress=False)
    again.encode(["x"])
    assert exports == ["fused"]  # healed once: the new export is trusted


def test_an_export_that_fails_keeps_torch(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("exporter exploded")

    monkeypatch.setattr(onnx_encoder, "_export", broken)
    embedder = Embedder(device="cpu", kind="transformer", onnx_cache=tmp_path, progress=False)
    assert embedder.encode(["x"]).shape == (1, 384)
    assert embedder.backend_used == "torch" and "exporter exploded" in embedder.backend_report["reason"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".export-")]  # no half-written export left


def test_bad_backend_choices_are_refused():
    with pytest.raises(ValueError, match="`backend` must be one of"):
        Embedder(backend="tensorrt")
    with pytest.raises(ValueError, match="the onnx backend runs on CPU"):
        Embedder(device="cuda", kind="transformer", backend="onnx", progress=False).encode(["x"])
