"""A published encoder: the verified ONNX export of the embedding model and its tokenizer in one folder,
which a gateway reads with ONNX Runtime and ``tokenizers`` alone (no torch, no transformers).

``regret-gateway export-encoder`` writes it where torch is installed (:func:`write_exported`, from an
:class:`~regret_gateway.encoders.embedder.Embedder` whose ONNX export passed its verification); the gateway reads
it when ``embedder.exported`` names it (:func:`read_exported`). Layout::

    <folder>/encoder.json     format, the source embedding (model, layers, quantize), dim, the graph's
                              inputs, the tokenizer's padding and truncation, the export's agreement with
                              torch, sha256 of the files
    <folder>/model.onnx       the verified graph (last hidden state; mean pooling is done in numpy)
    <folder>/tokenizer.json   the model's fast tokenizer

At export, :func:`write_exported` checks that :class:`ExportedTokenizer` gives the same token ids as the
transformers tokenizer on :data:`~regret_gateway.encoders.onnx_runtime.CHECK_PROMPTS` (at the configured length and
at 16 tokens), so the published encoder gives the embeddings the router was trained on.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from regret_gateway.files import file_matches, new_folder, sha256_file

FORMAT = 1
META = "encoder.json"
GRAPH = "model.onnx"
TOKENIZER = "tokenizer.json"


class ExportError(ValueError):
    """A published encoder that cannot be written or read (one line, naming the folder)."""


class ExportedTokenizer:
    """A ``tokenizers`` tokenizer called like the transformers tokenizer the embedder uses:
    ``tok(texts, padding=True, truncation=True, max_length=n, return_tensors="np")`` -> {input name: (n, s)
    int64 array}, padded to the longest text, truncated to ``max_length`` tokens (special tokens counted)."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(path))
        self._tok.no_truncation()
        self._tok.enable_padding(
            direction=meta["padding_side"],
            pad_id=int(meta["pad_id"]),
            pad_type_id=int(meta["pad_type_id"]),
            pad_token=meta["pad_token"],
        )
        self._truncation_side = meta["truncation_side"]
        self._inputs = tuple(meta["inputs"])
        self._max_length: int | None = None
        self._lock = threading.Lock()  # truncation is the tokenizer's state; the batcher may call from two threads

    @property
    def backend_tokenizer(self) -> Any:
        """The ``tokenizers`` tokenizer itself (as a transformers fast tokenizer's): the embedder's cut reads a copy."""
        return self._tok

    def __call__(self, texts: Sequence[str], *, padding: bool = True, truncation: bool = True, max_length: int,
                 return_tensors: str = "np") -> dict[str, np.ndarray]:  # fmt: skip
        if not (padding and truncation and return_tensors == "np"):
            raise ValueError("an exported tokenizer pads, truncates and returns numpy arrays")
        with self._lock:
            if self._max_length != max_length:
                self._tok.enable_truncation(max_length, direction=self._truncation_side)
                self._max_length = max_length
            encodings = self._tok.encode_batch(list(texts))
        out = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        return {name: out[name] for name in self._inputs}  # the graph's inputs (attention_mask among them)


def write_exported(folder: str | Path, *, graph: Path, tokenizer: Any, source: dict[str, Any], check: Sequence[str],
                   max_length: int) -> dict[str, Any]:  # fmt: skip
    """Publish ``graph`` (a verified ONNX export) and ``tokenizer`` (the transformers fast tokenizer it was
    verified with) into ``folder`` (it must not exist; written under a temporary name, renamed into place).
    ``source``: what the embedding is (model, layers, quantize, dim, inputs, agreement). Refuses a
    tokenizer whose ``tokenizers`` form gives other ids than transformers on ``check``. Returns the meta."""
    folder = Path(folder)
    if folder.exists():
        raise ExportError(f"{folder} already exists: remove it or choose another --out")
    if not getattr(tokenizer, "is_fast", False):
        raise ExportError(f"the tokenizer of {source.get('model')!r} has no fast (tokenizers) form to publish")
    with new_folder(folder) as tmp:
        shutil.copyfile(graph, tmp / GRAPH)
        tokenizer.backend_tokenizer.save(str(tmp / TOKENIZER))
        meta = {
            "format": FORMAT,
            **source,
            "padding_side": tokenizer.padding_side,
            "truncation_side": tokenizer.truncation_side,
            "pad_token": tokenizer.pad_token,
            "pad_id": int(tokenizer.pad_token_id),
            "pad_type_id": int(getattr(tokenizer, "pad_token_type_id", 0)),
        }
        published = ExportedTokenizer(tmp / TOKENIZER, meta)
        for length in (max_length, 16):
            for texts in (list(check), *([t] for t in check)):
                want = tokenizer(list(texts), padding=True, truncation=True, max_length=length, return_tensors="np")
                got = published(texts, max_length=length)
                for name, ids in got.items():
                    if not np.array_equal(ids, np.asarray(want[name])):
                        raise ExportError(f"the published tokenizer's {name} differ from transformers' at {length} tokens")
        meta["files"] = {name: sha256_file(tmp / name) for name in (GRAPH, TOKENIZER)}
        (tmp / META).write_text(json.dumps(meta, indent=2))
    return meta


def read_exported(folder: str | Path, *, model: str, layers: int | None, quantize: bool) -> dict[str, Any]:
    """The meta of the published encoder in ``folder``, checked: its files are whole and it is the embedding
    the configuration asks for (``model``, ``layers``, ``quantize``); raises :class:`ExportError` in one line."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / META).read_text())
    except FileNotFoundError:
        raise ExportError(
            f"embedder.exported: {folder} holds no {META} (make one with `regret-gateway export-encoder`)"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ExportError(f"embedder.exported: {folder / META} cannot be read ({exc})") from None
    if isinstance(meta, dict) and meta.get("kind") == "static":
        raise ExportError(f"embedder.exported: {folder} is a static encoder: set `embedder.kind: static` to serve it")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ExportError(f"embedder.exported: {folder / META} is not a format-{FORMAT} published encoder")
    wanted = {"model": model, "layers": layers, "quantize": quantize}
    if (have := {k: meta.get(k) for k in wanted}) != wanted:
        raise ExportError(f"embedder.exported: {folder} holds the encoder of {have}, the configuration asks for {wanted}")
    for name in (GRAPH, TOKENIZER):
        if not file_matches(folder, name, (meta.get("files") or {}).get(name)):
            raise ExportError(f"embedder.exported: {folder / name} is missing, a link, or does not match its checksum")
    return meta
