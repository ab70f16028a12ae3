"""The embedding encoder in torch, traced: the whole forward pass in one TorchScript call.

Why: eager transformers code runs every op from Python, and torch lets go of the GIL around many of them.
In the proxy, the event loop's thread holds the GIL most of the time under load, and each time the encoder's
worker thread wants it back it waits up to the interpreter's switch interval (5 ms): a ~200-token prompt's
27 ms eager forward pass on CPU took 362 ms beside one busy Python thread, and eager torch on a GPU shed
every request at concurrency 32 (docs/experiments/gateway-overhead.md). A traced graph runs in C++ and takes the GIL back a
few times per pass.

``trace_encoder(encoder, tokenizer, device, max_length)`` traces the model as loaded (its attention
implementation too) on a padded batch, on the device it serves on, and verifies it against the eager model on :data:`~regret_gateway.encoders.onnx_runtime.CHECK_PROMPTS`
(short and ~200-token prompts, batched and alone: other batch sizes and lengths than the trace saw) to the
ONNX export's cosine, :data:`~regret_gateway.encoders.onnx_runtime.MIN_COSINE`. It returns ``(TracedEncoder, report)``,
or ``(None, report)`` with the reason where tracing fails or disagrees; the caller then runs the eager model.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

from regret_gateway.encoders import onnx_runtime as onnx_encoder
from regret_gateway.encoders.onnx_runtime import CHECK_PROMPTS, _agreement, _input_names, _last_hidden, eager_hidden

log = logging.getLogger(__name__)


class TracedEncoder:
    """The last hidden state of a traced encoder: ``hidden(batch) -> (n, s, d)`` for a tokenizer batch."""

    def __init__(self, module: Any, inputs: list[str], device: str) -> None:
        self.module = module
        self.inputs = inputs
        self.device = device

    def hidden(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        import torch

        # optimized_execution(False): the graph as traced, run by TorchScript's interpreter -- no profiling runs
        # and fused kernels compiled afresh for each new batch shape (a stall inside some request's budget)
        with torch.inference_mode(), torch.jit.optimized_execution(False):
            out = self.module(*(torch.as_tensor(batch[name], device=self.device) for name in self.inputs))
        return out.float().cpu().numpy()


def trace_encoder(encoder: Any, tokenizer: Any, device: str, max_length: int) -> tuple[TracedEncoder | None, dict]:
    """The verified trace of ``encoder`` (a transformers model on ``device``) and a report ``{"status":
    "verified" | "refused" | "failed", "cosine", "threshold", "reason"}``; ``(None, report)`` where it cannot
    be served (the eager model then is)."""
    import torch

    names = _input_names(tokenizer)
    try:
        # two prompts of different lengths: the shorter is padded, so the trace records the masked path (a
        # trace of an unpadded batch may record the path that skips the mask, wrong for padded batches)
        sample = tokenizer(["an example prompt", "a second, longer example prompt"], padding=True, return_tensors="pt")
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on Python values it records as constants
            module = torch.jit.trace(_last_hidden(encoder), tuple(sample[n].to(device) for n in names), check_trace=False)
        traced = TracedEncoder(module, names, device)
        cosine = _agreement(tokenizer, traced.hidden, lambda batch: eager_hidden(encoder, batch, device), max_length)
    except Exception as exc:  # noqa: BLE001 - any failure means: serve the eager model, and say why
        report = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:500]}
        log.warning("regret-gateway: tracing the torch encoder failed (%s); serving it eager", report["reason"])
        return None, report
    threshold = onnx_encoder.MIN_COSINE  # the ONNX export's, read when the trace is checked (not bound at import)
    reason = f"min cosine to the eager model {cosine:.6f} on {len(CHECK_PROMPTS)} prompts (need >= {threshold})"
    if cosine < threshold:
        log.warning("regret-gateway: the traced torch encoder is refused (%s); serving it eager", reason)
        return None, {"status": "refused", "cosine": cosine, "threshold": threshold, "reason": reason}
    return traced, {"status": "verified", "cosine": cosine, "threshold": threshold, "reason": reason}
