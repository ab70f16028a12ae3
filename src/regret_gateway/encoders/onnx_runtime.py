"""The embedding encoder on ONNX Runtime: exported once from a local model folder, verified, cached.

``load_onnx_encoder(model_path, cache_root, torch_encoder, tokenizer)`` returns an :class:`OnnxEncoder`
(the last hidden state of the transformer, run by ONNX Runtime's CPU provider with its graph
optimisations) or ``None`` with the reason when it cannot or may not be used; the caller then keeps torch.

- Export, from the model already loaded from the local folder (nothing is downloaded), batch and sequence
  axes dynamic. First the **fused** graph (``fuse=True``, the default): torch's TorchScript exporter on the
  model with its eager attention, then ONNX Runtime's transformer optimiser, which fuses each layer's
  attention into one ``Attention`` op and its layer norms and GELUs (BERT-family encoders; a short prompt's
  forward pass ~25% faster on the 2-core machine, docs/experiments/gateway-overhead.md). It is kept only
  when every layer's attention was fused and it passes the verification; otherwise -- another architecture,
  a torch without the TorchScript exporter -- the **plain** graph of the dynamo exporter, and the report
  says why (``fusion``).
- Cache: ``cache_root/<folder name>-<key>/`` where the key hashes every file of the model folder, the
  torch version, :data:`EXPORT_VERSION` and the options; a changed model, exporter or option gets a new
  export. The export is written to a temporary folder and renamed into place, so concurrent workers never
  read a half written file. ``export.json`` records the SHA-256 of ``model.onnx``: a cached graph is served
  only if it is a regular file of the folder (no link) with that checksum; a replaced, corrupted or
  linked one is removed, with one log line, and exported again.
- Verification at export: the ONNX and torch embeddings of :data:`CHECK_PROMPTS` (short and ~200-token
  prompts, batched and alone) must agree to a cosine of at least :data:`MIN_COSINE` (the int8 opt-in: at
  least :data:`MIN_COSINE_INT8`); otherwise the export is refused, the refusal is cached with its measured
  agreement (no re-export on every start) and the caller keeps torch.
- Opt-in dynamic int8 quantisation of the weights (``quantize=True``), with its measured agreement.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from regret_gateway.files import file_matches, sha256_file, update_with_tree

log = logging.getLogger(__name__)

EXPORT_VERSION = "3"  # bump when the export or the verification changes: cached exports are redone
MIN_COSINE = 0.9999
MIN_COSINE_INT8 = 0.99
CHECK_PROMPTS = (
    "hi",
    "Translate into French: 'the library opens at nine'",
    "Write a Python function that parses a CSV file and returns the rows as dictionaries.",
    "Which of these is a prime number? (A) 21 (B) 27 (C) 29 (D) 33",
    " ".join(f"Step {i}: add the previous two numbers and explain the result in a sentence." for i in range(20)),
    "You are a helpful assistant.\nSummarise the following meeting notes in three bullet points. " * 6,
)


def mean_pool(hidden: np.ndarray, mask: np.ndarray, normalize: bool) -> np.ndarray:
    """Mean of the token states where ``mask`` is 1, optionally L2-normalised: (n, s, d) -> (n, d)."""
    m = mask[..., None].astype(np.float32)
    pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    if normalize:
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype(np.float32)


def model_key(model_path: str | Path, *, quantize: bool, layers: int | None = None, fuse: bool = True) -> str:
    """Hash of every file of the model folder (names and bytes), the torch version and the export options
    (``layers``: the first N transformer layers only; ``fuse``: try the fused graph first)."""
    import torch

    options = [quantize, *([layers] if layers else []), *([] if fuse else ["plain"])]
    h = hashlib.sha256(json.dumps([EXPORT_VERSION, torch.__version__, *options]).encode())
    update_with_tree(h, model_path)
    return h.hexdigest()[:20]


class OnnxEncoder:
    """The last hidden state of an exported encoder: ``hidden(batch) -> (n, s, d)`` for a tokenizer batch."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            options.intra_op_num_threads = threads
        # ONNX Runtime's worker threads spin on the CPU after every run, waiting for the next one; in the proxy
        # they spin on the cores its interpreter needs. Off: the hook's CPU per short request fell from ~42
        # to ~17 ms at concurrency 1 and from ~24 to ~13 ms at 32 (docs/experiments/gateway-overhead.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.path = path
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def hidden(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        feed = {name: np.asarray(batch[name], dtype=np.int64) for name in self.inputs}
        return self.session.run(None, feed)[0]


def eager_hidden(encoder: Any, batch: dict[str, np.ndarray], device: str = "cpu") -> np.ndarray:
    """The last hidden state of the transformers model ``encoder`` on ``device``, run eagerly: (n, s, d)."""
    import torch

    with torch.inference_mode():
        out = encoder(**{k: torch.as_tensor(v, device=device) for k, v in batch.items()})
    return out.last_hidden_state.float().cpu().numpy()


def _agreement(tokenizer, served_hidden: Callable, reference_hidden: Callable, max_length: int) -> float:
    """Smallest cosine between the embeddings of CHECK_PROMPTS, batched and one at a time, from the encoder to
    be served (an ONNX graph, a torch trace) and from the eager torch model it must agree with."""
    worst = 1.0
    for texts in (list(CHECK_PROMPTS), *([t] for t in CHECK_PROMPTS)):
        batch = dict(tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="np"))
        a = mean_pool(served_hidden(batch), batch["attention_mask"], True)
        b = mean_pool(reference_hidden(batch), batch["attention_mask"], True)
        worst = min(worst, float((a * b).sum(1).min()))
    return worst


def _input_names(tokenizer) -> list[str]:
    return ["input_ids", "attention_mask", *(["token_type_ids"] if "token_type_ids" in tokenizer.model_input_names else [])]


def _last_hidden(encoder: Any) -> Any:
    """``encoder`` as a module of positional tensors -> its last hidden state (what both exporters trace)."""
    import torch

    class LastHidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: Any = None) -> torch.Tensor:
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state

    return LastHidden(encoder).eval()


def _sample(tokenizer) -> dict:
    return tokenizer(["an example prompt", "a second, longer example prompt"], padding=True, return_tensors="pt")


def _export_plain(encoder: Any, tokenizer, target: Path) -> None:
    """The dynamo exporter's graph of ``encoder``, unfused."""
    import torch
    from torch.export import Dim

    names, sample = _input_names(tokenizer), _sample(tokenizer)
    batch, seq = Dim("batch"), Dim("sequence")
    program = torch.onnx.export(
        _last_hidden(encoder),
        tuple(sample[n] for n in names),
        dynamo=True,
        input_names=names,
        output_names=["last_hidden_state"],
        dynamic_shapes=tuple({0: batch, 1: seq} for _ in names),
        verbose=False,
    )
    assert program is not None
    program.save(str(target))


def _export_fused(encoder: Any, tokenizer, target: Path) -> None:
    """The TorchScript graph of ``encoder`` with its eager attention (the pattern ONNX Runtime's optimiser
    recognises), fused; raises when not every layer's attention was fused."""
    import warnings

    import torch
    from onnxruntime.transformers.optimizer import optimize_model

    config = encoder.config
    names, sample = _input_names(tokenizer), _sample(tokenizer)
    traced = target.with_suffix(".traced.onnx")
    attention = config._attn_implementation
    encoder.set_attn_implementation("eager")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's deprecation and the tracer's constant-folding notes
            torch.onnx.export(
                _last_hidden(encoder),
                tuple(sample[n] for n in names),
                str(traced),
                dynamo=False,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names},
                opset_version=17,
            )
    finally:
        encoder.set_attn_implementation(attention)
    fused = optimize_model(str(traced), model_type="bert", num_heads=int(config.num_attention_heads),
                           hidden_size=int(config.hidden_size), opt_level=0)  # fmt: skip
    traced.unlink()
    layers = int(config.num_hidden_layers)
    attentions = fused.get_fused_operator_statistics().get("Attention", 0)
    if attentions != layers:
        raise ValueError(f"ONNX Runtime's optimiser fused the attention of {attentions} of {layers} layers")
    fused.save_model_to_file(str(target))


def _quantize(source: Path, target: Path) -> None:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul", "Attention"],
        extra_options={"DefaultTensorType": TensorProto.FLOAT},  # the fused graph's ops have no shape inference
    )


def _export(encoder: Any, tokenizer, target: Path, graph: str, quantize: bool) -> None:
    """Write the ``graph`` ("fused" or "plain") export of ``encoder`` to ``target`` (int8 weights with ``quantize``)."""
    write = _export_fused if graph == "fused" else _export_plain
    if not quantize:
        write(encoder, tokenizer, target)
        return
    fp32 = target.with_suffix(".fp32.onnx")
    write(encoder, tokenizer, fp32)
    _quantize(fp32, target)
    fp32.unlink()


GRAPH = "model.onnx"  # the verified graph in a cache folder


def _cached_report(folder: Path) -> dict | None:
    """The cached export's report, or None (logged once: it is exported again) where it cannot be trusted:
    unreadable, or a verified graph that is missing, a link, or not the bytes that were verified."""
    try:
        report = json.loads((folder / "export.json").read_text())
    except (OSError, ValueError):
        report = None
    if isinstance(report, dict) and report.get("status") != "verified" and "status" in report:
        return report
    if isinstance(report, dict) and file_matches(folder, GRAPH, (report.get("files") or {}).get(GRAPH)):
        return report
    log.warning("regret-gateway: the cached ONNX encoder in %s is replaced, corrupted or a link (its %s does not match "
                "the checksum of its export); it is removed and exported again", folder, GRAPH)  # fmt: skip
    return None


def load_onnx_encoder(
    model_path: str | Path,
    cache_root: str | Path,
    torch_encoder: Callable[[], Any],
    tokenizer: Any,
    *,
    max_length: int = 256,
    quantize: bool = False,
    threads: int | None = None,
    layers: int | None = None,
    fuse: bool = True,
) -> tuple[OnnxEncoder | None, dict]:
    """The verified ONNX encoder of the model in ``model_path`` (exported on first use from the torch model
    that ``torch_encoder()`` loads -- with ``layers`` set, a model of its first ``layers`` layers, which the
    cache key records; a cached export needs no torch model), and a report ``{"path", "cosine", "status",
    "reason", "graph", "fusion"}``; ``(None, report)`` when ONNX Runtime is missing, the export fails or
    its agreement with torch is below the threshold. ``fuse=False``: the plain graph only."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        return None, {"status": "unavailable", "reason": f"onnxruntime is not installed ({exc})"}
    key = model_key(model_path, quantize=quantize, layers=layers, fuse=fuse)
    folder = Path(cache_root) / f"{Path(model_path).name}-{key}"
    report_file = folder / "export.json"
    if report_file.is_file():
        report = _cached_report(folder)
        if report is not None and report["status"] != "verified":
            return None, report
        if report is not None:
            return OnnxEncoder(folder / GRAPH, threads), report
        shutil.rmtree(folder, ignore_errors=True)  # healed: exported again below

    def torch_hidden(batch: dict[str, np.ndarray]) -> np.ndarray:
        return eager_hidden(torch_encoder(), batch)

    threshold = MIN_COSINE_INT8 if quantize else MIN_COSINE
    Path(cache_root).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=cache_root))
    try:
        chosen, cosines, notes = _first_agreeing(tmp, ("fused", "plain") if fuse else ("plain",), torch_encoder, tokenizer,
                                                 torch_hidden, quantize=quantize, threads=threads, threshold=threshold,
                                                 max_length=max_length)  # fmt: skip
        for leftover in tmp.glob("*.onnx*"):
            if leftover.name != GRAPH:
                leftover.unlink()
        if chosen is None and not cosines:  # no graph could be exported and run
            report = {"status": "failed", "reason": "; ".join(f"{g}: {n}" for g, n in notes.items()), "quantize": quantize}
            log.warning("regret-gateway: ONNX export of %s failed (%s); embedding with torch", model_path, report["reason"])
            return None, report
        graph = chosen or max(cosines, key=cosines.__getitem__)
        cosine = cosines[graph]
        report = {
            "status": "verified" if chosen else "refused",
            "cosine": cosine,
            "threshold": threshold,
            "quantize": quantize,
            "graph": graph,
            "reason": f"min cosine to torch {cosine:.6f} on {len(CHECK_PROMPTS)} prompts (need >= {threshold})",
            "path": str(folder / GRAPH),
        }
        if "fused" in notes:
            report["fusion"] = notes["fused"]
        if not chosen:
            log.warning("regret-gateway: ONNX export of %s refused (%s); embedding with torch", model_path, report["reason"])
        elif "fused" in notes:
            log.info("regret-gateway: the plain ONNX graph of %s is served (fused graph: %s)", model_path, notes["fused"])
        if chosen:
            report["files"] = {GRAPH: sha256_file(tmp / GRAPH)}
        (tmp / "export.json").write_text(json.dumps(report, indent=2))
        try:
            os.rename(tmp, folder)
        except OSError:  # another worker put its export there first: use that one
            shutil.rmtree(tmp, ignore_errors=True)
            return load_onnx_encoder(model_path, cache_root, torch_encoder, tokenizer, max_length=max_length, quantize=quantize,
                                     threads=threads, layers=layers, fuse=fuse)  # fmt: skip
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return (OnnxEncoder(folder / GRAPH, threads) if chosen else None), report


def _first_agreeing(
    tmp: Path, graphs: tuple[str, ...], torch_encoder: Callable[[], Any], tokenizer: Any,
    torch_hidden: Callable[[dict[str, np.ndarray]], np.ndarray], *, quantize: bool, threads: int | None,
    threshold: float, max_length: int,
) -> tuple[str | None, dict[str, float], dict[str, str]]:  # fmt: skip
    """(the first of ``graphs`` exported into ``tmp`` whose agreement with torch reaches ``threshold`` -- moved
    to ``tmp / GRAPH`` -- or None; each graph's cosine; why each other graph is not the one served)."""
    notes: dict[str, str] = {}
    cosines: dict[str, float] = {}
    for graph in graphs:
        path = tmp / f"{graph}.onnx"
        try:
            _export(torch_encoder(), tokenizer, path, graph, quantize)
            cosines[graph] = _agreement(tokenizer, OnnxEncoder(path, threads).hidden, torch_hidden, max_length)
        except Exception as exc:  # noqa: BLE001 - any failure means: the next graph, or keep torch
            notes[graph] = f"{type(exc).__name__}: {exc}"[:500]
            continue
        if cosines[graph] >= threshold:
            path.rename(tmp / GRAPH)
            return graph, cosines, notes
        notes[graph] = f"min cosine to torch {cosines[graph]:.6f} (need >= {threshold})"
    return None, cosines, notes
