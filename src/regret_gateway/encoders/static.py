"""The static encoder: one vector per token of the tokenizer's vocabulary, distilled from a transformer
(:mod:`regret_gateway.encoders.distill`); a text's embedding is the mean of its tokens' vectors, unit length.
Serving it needs numpy and ``tokenizers`` only: a lookup and a mean, no forward pass.

A folder in model2vec's layout (``StaticModel.from_pretrained`` reads it too), plus the meta this project
checks before it serves one::

    <folder>/model.safetensors  one float32 tensor "embeddings": (vocabulary size, dims)
    <folder>/tokenizer.json     the source model's fast tokenizer (no padding, no truncation)
    <folder>/config.json        model2vec's config (model_type, hidden_dim, normalize, ...)
    <folder>/encoder.json       format, kind "static", the source (model, dims, distillation version, torch),
                                the [UNK] id, sha256 of the three files above

A text is tokenized without special tokens; at most ``max_length`` tokens are read, cut as
``truncation`` says (:mod:`regret_gateway.truncation`: the head, or the head and the tail; of at most
:data:`~regret_gateway.truncation.CHARS_PER_TOKEN` characters per kept token, so a huge prompt costs no more than a long one);
[UNK] tokens carry nothing and are skipped; a text with no known token embeds as zeros.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from regret_gateway.files import file_matches, new_folder, sha256_file
from regret_gateway.truncation import DEFAULT_TRUNCATION, clip_chars, clip_ids

FORMAT = 1
KIND = "static"
META = "encoder.json"
VECTORS = "model.safetensors"
TOKENIZER = "tokenizer.json"
CONFIG = "config.json"
FILES = (VECTORS, TOKENIZER, CONFIG)
_TENSOR = "embeddings"


class StaticError(ValueError):
    """A static encoder that cannot be written or read (one line, naming the folder)."""


def save_vectors(path: str | Path, vectors: np.ndarray) -> None:
    """Write ``vectors`` as a safetensors file of one float32 tensor named "embeddings" (model2vec's)."""
    data = np.ascontiguousarray(vectors, dtype="<f4")
    header = json.dumps({_TENSOR: {"dtype": "F32", "shape": list(data.shape), "data_offsets": [0, data.nbytes]}}).encode()
    header += b" " * (-len(header) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(header)))
        fh.write(header)
        fh.write(data.tobytes())


def load_vectors(path: str | Path) -> np.ndarray:
    """The "embeddings" tensor of a safetensors file (float32, 2-d); :class:`StaticError` if it is not one."""
    raw = Path(path).read_bytes()
    try:
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + n])
        spec = header[_TENSOR]
        start, end = (8 + n + int(o) for o in spec["data_offsets"])
        rows, cols = (int(s) for s in spec["shape"])
        if spec["dtype"] != "F32" or end - start != rows * cols * 4 or end > len(raw):
            raise ValueError(f"a {spec['dtype']} tensor of shape {spec['shape']} in {end - start} bytes")
    except (struct.error, ValueError, KeyError, TypeError) as exc:
        raise StaticError(f"{path} is not a static encoder's vectors ({exc})") from None
    return np.frombuffer(raw, dtype="<f4", count=rows * cols, offset=start).reshape(rows, cols).astype(np.float32)


class StaticEncoder:
    """The static encoder in ``folder`` (checked by :func:`read_static` first): ``embed(texts, max_length)``
    -> (n, dims) float32, each row the mean of its tokens' vectors (L2-normalised with ``normalize``)."""

    def __init__(self, folder: str | Path, meta: dict[str, Any]) -> None:
        from tokenizers import Tokenizer

        folder = Path(folder)
        self.path = folder
        self.vectors = load_vectors(folder / VECTORS)
        self._tok = Tokenizer.from_file(str(folder / TOKENIZER))
        self._tok.no_padding()
        self._tok.no_truncation()
        self._unk = meta.get("unk_id")
        self.dim = int(self.vectors.shape[1])

    def token_ids(self, texts: Sequence[str], max_length: int, truncation: str = DEFAULT_TRUNCATION) -> list[np.ndarray]:
        """Each text's token ids as it is read (at most ``max_length``, cut as ``truncation`` says), [UNK] left out."""
        clipped = [clip_chars(t, max_length, truncation) for t in texts]
        out = []
        for e in self._tok.encode_batch(clipped, add_special_tokens=False):
            ids = clip_ids(e.ids, max_length, truncation)
            out.append(ids[ids != self._unk] if self._unk is not None else ids)
        return out

    def embed(
        self, texts: Sequence[str], max_length: int, normalize: bool = True, truncation: str = DEFAULT_TRUNCATION
    ) -> np.ndarray:
        ids = self.token_ids(texts, max_length, truncation)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        full = [i for i, row in enumerate(ids) if row.size]
        if full:
            lengths = np.array([ids[i].size for i in full])
            sums = np.add.reduceat(self.vectors[np.concatenate([ids[i] for i in full])], np.r_[0, np.cumsum(lengths)[:-1]])
            out[full] = sums / lengths[:, None]
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


def write_static(folder: str | Path, *, vectors: np.ndarray, tokenizer: Any, source: dict[str, Any],
                 check: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    """Write a static encoder into ``folder`` (it must not exist; written under a temporary name, renamed
    into place): ``vectors`` (one row per token id of ``tokenizer``, a transformers fast tokenizer) and the
    tokenizer. Refuses a tokenizer whose ``tokenizers`` form gives other ids than transformers on ``check``.
    Returns the meta."""
    folder = Path(folder)
    if folder.exists():
        raise StaticError(f"{folder} already exists: remove it or choose another --out")
    if not getattr(tokenizer, "is_fast", False):
        raise StaticError(f"the tokenizer of {source.get('model')!r} has no fast (tokenizers) form to publish")
    if vectors.ndim != 2 or vectors.shape[0] != len(tokenizer):
        raise StaticError(f"{vectors.shape[0]} vectors for a vocabulary of {len(tokenizer)} tokens")
    with new_folder(folder) as tmp:
        save_vectors(tmp / VECTORS, vectors)
        tokenizer.backend_tokenizer.save(str(tmp / TOKENIZER))
        dims = int(vectors.shape[1])
        config = {"model_type": "model2vec", "architectures": ["StaticModel"], "tokenizer_name": source.get("model"),
                  "hidden_dim": dims, "seq_length": 1_000_000, "normalize": True}  # fmt: skip
        (tmp / CONFIG).write_text(json.dumps(config, indent=2))
        meta = {"format": FORMAT, "kind": KIND, **source, "dim": dims, "unk_id": tokenizer.unk_token_id}
        published = StaticEncoder(tmp, meta)
        for text in check:
            want = [i for i in tokenizer(text, add_special_tokens=False)["input_ids"][:64] if i != meta["unk_id"]]
            if published.token_ids([text], 64, "head")[0].tolist() != want:
                raise StaticError(f"the published tokenizer's ids differ from transformers' on {text[:40]!r}")
        meta["files"] = {name: sha256_file(tmp / name) for name in FILES}
        (tmp / META).write_text(json.dumps(meta, indent=2))
    return meta


def read_static(folder: str | Path, *, model: str, dims: int) -> dict[str, Any]:
    """The meta of the static encoder in ``folder``, checked: its files are whole (regular files of the folder
    with their recorded sha256) and it is the encoder the configuration asks for (``model`` distilled to
    ``dims``); raises :class:`StaticError` in one line."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / META).read_text())
    except FileNotFoundError:
        raise StaticError(f"{folder} holds no {META} (make one with `regret-gateway export-encoder --kind static`)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise StaticError(f"{folder / META} cannot be read ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("kind") != KIND:
        raise StaticError(
            f"{folder} is not a format-{FORMAT} static encoder (kind {meta.get('kind') if isinstance(meta, dict) else None!r})"
        )
    wanted = {"model": model, "dim": dims}
    if (have := {k: meta.get(k) for k in wanted}) != wanted:
        raise StaticError(f"{folder} holds the static encoder of {have}, the configuration asks for {wanted}")
    for name in FILES:
        if not file_matches(folder, name, (meta.get("files") or {}).get(name)):
            raise StaticError(f"{folder / name} is missing, a link, or does not match its checksum")
    return meta
