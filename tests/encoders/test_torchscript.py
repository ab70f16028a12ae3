"""Torch serves the model's verified TorchScript trace (regret_gateway.encoders.torchscript): the same embedding as
the eager model, in one C++ call per forward pass instead of Python per op (which, beside the proxy's busy
event loop, waits on the GIL for every op)."""

import sys

import numpy as np
import pytest

from regret_gateway.encoders.embedder import Embedder

TEXTS = ["hi", "How do I sort a list in Python?", "Summarise the meeting notes in three bullet points. " * 20]


def _python_calls_into(prefix: str, fn) -> int:
    """How many Python functions of modules named ``prefix...`` run while ``fn()`` runs (in this thread)."""
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "call" and frame.f_globals.get("__name__", "").startswith(prefix):
            calls += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


@pytest.fixture(scope="module")
def eager():
    return Embedder(device="cpu", kind="transformer", backend="torch", trace=False, progress=False)


def test_torch_serves_the_verified_trace_and_embeds_as_the_eager_model(eager):
    traced = Embedder(device="cpu", kind="transformer", backend="torch", progress=False)
    X = traced.encode(TEXTS)  # one padded batch: lengths the trace did not see
    assert traced.traced and traced.trace_report["status"] == "verified"
    assert traced.trace_report["cosine"] >= traced.trace_report["threshold"] == 0.9999
    assert not eager.traced and eager.trace_report == {}
    assert np.allclose(X, eager.encode(TEXTS), atol=1e-5)
    for text in TEXTS:  # alone too: batch size 1, other lengths
        assert np.allclose(traced.encode([text]), eager.encode([text]), atol=1e-5)
    # the forward pass runs in TorchScript, not through the modules' Python code; the eager model runs
    # hundreds of module calls per pass
    in_modules = _python_calls_into("torch.nn.modules", lambda: traced.encode(TEXTS[:2]))
    assert in_modules <= 3, in_modules
    assert _python_calls_into("torch.nn.modules", lambda: eager.encode(TEXTS[:2])) > 50


def test_a_trace_that_disagrees_with_the_eager_model_is_refused_and_the_eager_model_serves(monkeypatch, eager):
    from regret_gateway.encoders import onnx_runtime as onnx_encoder

    monkeypatch.setattr(onnx_encoder, "MIN_COSINE", 1.01)  # no trace can agree this well
    refused = Embedder(device="cpu", kind="transformer", backend="torch", progress=False)
    X = refused.encode(TEXTS)
    assert not refused.traced
    assert refused.trace_report["status"] == "refused" and "need >= 1.01" in refused.trace_report["reason"]
    assert np.allclose(X, eager.encode(TEXTS), atol=1e-6)


def test_a_model_that_cannot_be_traced_is_served_eager_with_the_reason(monkeypatch, eager):
    import torch

    def cannot(*args, **kwargs):
        raise RuntimeError("this model's forward pass cannot be traced")

    monkeypatch.setattr(torch.jit, "trace", cannot)
    failed = Embedder(device="cpu", kind="transformer", backend="torch", progress=False)
    X = failed.encode(TEXTS)
    assert not failed.traced
    assert failed.trace_report == {"status": "failed", "reason": "RuntimeError: this model's forward pass cannot be traced"}
    assert np.allclose(X, eager.encode(TEXTS), atol=1e-6)
