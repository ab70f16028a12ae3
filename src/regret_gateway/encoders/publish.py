"""``regret-gateway export-encoder``: an embedder's encoder published as a folder the gateway serves without
torch (the static encoder's files, or the verified ONNX graph with its tokenizer)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from regret_gateway.encoders.embedder import Embedder, resolve_device
from regret_gateway.files import new_folder


def publish_encoder(embedder: Embedder, folder: str | Path) -> dict:
    """Publish ``embedder``'s verified ONNX encoder and its tokenizer into ``folder`` (see
    :mod:`regret_gateway.encoders.exported`); needs torch (the export is made and verified with it)."""
    from regret_gateway.encoders.exported import ExportError, write_exported
    from regret_gateway.encoders.onnx_runtime import CHECK_PROMPTS

    if embedder.exported is not None:
        raise ExportError("the embedder already reads a published encoder (embedder.exported): export from the model")
    if embedder.kind == "static":
        embedder._load()
        folder = Path(folder)
        if folder.exists():
            raise ExportError(f"{folder} already exists: remove it or choose another --out")
        with new_folder(folder) as tmp:
            shutil.copytree(embedder._static.path, tmp, dirs_exist_ok=True)  # checked when it was loaded
        return json.loads((folder / "encoder.json").read_text())
    if embedder.backend == "torch" or resolve_device(embedder.device) != "cpu":
        raise ExportError("a published encoder is the CPU ONNX graph: export with device cpu and backend auto or onnx")
    embedder._load()
    if embedder._onnx is None:
        raise ExportError(f"the ONNX export of {embedder.model!r} is not usable: {embedder.backend_report.get('reason')}")
    source = {"model": embedder.model, "layers": embedder.layers, "quantize": embedder.quantize, "dim": embedder.dimension,
              "inputs": list(embedder._onnx.inputs), "graph": embedder.backend_report.get("graph"),
              "cosine": embedder.backend_report.get("cosine")}  # fmt: skip
    return write_exported(folder, graph=Path(embedder._onnx.path), tokenizer=embedder._tokenizer, source=source,
                          check=CHECK_PROMPTS, max_length=embedder.max_length)  # fmt: skip
