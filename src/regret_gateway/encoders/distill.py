"""Distilling the static encoder (:mod:`regret_gateway.encoders.static`) from a local transformer, with no
data: model2vec's method, in this project's code.

- Every token id of the vocabulary, alone between the tokenizer's separator and class tokens (model2vec's
  order), goes through the model; the mean of the three output states is that token's vector.
- PCA to ``dims`` components (centred, exact SVD): MiniLM's 384 dimensions to 256 by default.
- SIF weighting with each token's frequency estimated from its vocabulary rank by Zipf's law (a WordPiece
  vocabulary lists frequent tokens first): the vector of rank r is scaled by a / (a + p(r)), a = 1e-4,
  so frequent tokens weigh less in a text's mean.

Needs torch and transformers (the ``torch`` extra); the 30,522 tokens of the bundled MiniLM take about
25 s on 2 cores. :func:`load_static_encoder` keeps one distillation per model, dims and torch version in
the encoders' cache (``<cache>/static-<model folder>-<key>/``; the key hashes every file of the model
folder, :data:`DISTILL_VERSION`, dims and the torch version), checked like a published one on every load;
one that fails its checks is removed, with one log line, and distilled again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from regret_gateway.encoders.static import StaticEncoder, StaticError, read_static, write_static
from regret_gateway.files import new_folder, update_with_tree

log = logging.getLogger(__name__)

DISTILL_VERSION = "1"  # bump when the distillation changes: cached ones are redone
SIF = 1e-4
BATCH = 1024


def distill_vectors(model_path: str | Path, dims: int, *, progress: bool = False) -> tuple[np.ndarray, Any]:
    """One ``dims``-d vector per token id of the model in ``model_path``, and its transformers tokenizer."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path), local_files_only=True)
    model = AutoModel.from_pretrained(str(model_path), local_files_only=True).eval()
    vocab = len(tokenizer)
    if not 1 <= dims <= int(model.config.hidden_size):
        raise StaticError(f"static dims must be between 1 and the model's {model.config.hidden_size}, got {dims}")
    first, last = tokenizer.sep_token_id, tokenizer.cls_token_id
    if first is None or last is None:
        raise StaticError(f"the tokenizer of {model_path} has no separator and class tokens to frame each token with")
    ids = torch.arange(vocab)
    framed = torch.stack([torch.full_like(ids, first), ids, torch.full_like(ids, last)], dim=1)
    starts = range(0, vocab, BATCH)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="distilling the static encoder", unit="batch")
    parts = []
    with torch.inference_mode():
        for s in starts:
            batch = framed[s : s + BATCH]
            hidden = model(input_ids=batch, attention_mask=torch.ones_like(batch), token_type_ids=torch.zeros_like(batch))
            parts.append(hidden.last_hidden_state.mean(1).float().numpy())
    states = np.concatenate(parts).astype(np.float64)
    states -= states.mean(0)
    _, _, vt = np.linalg.svd(states, full_matrices=False)
    vectors = states @ vt[:dims].T
    inverse_rank = 1.0 / np.arange(2, vocab + 2)
    vectors *= (SIF / (SIF + inverse_rank / inverse_rank.sum()))[:, None]
    return vectors.astype(np.float32), tokenizer


def distill_static(model_path: str | Path, folder: str | Path, *, model: str, dims: int, progress: bool = False) -> dict:
    """Distil the model in ``model_path`` (configured as ``model``) and write it into ``folder``; the meta."""
    import torch

    from regret_gateway.encoders.onnx_runtime import CHECK_PROMPTS

    vectors, tokenizer = distill_vectors(model_path, dims, progress=progress)
    source = {"model": model, "distill_version": DISTILL_VERSION, "torch": torch.__version__, "sif": SIF}
    return write_static(folder, vectors=vectors, tokenizer=tokenizer, source=source, check=CHECK_PROMPTS)


def cache_key(model_path: str | Path, dims: int) -> str:
    import torch

    h = hashlib.sha256(json.dumps([DISTILL_VERSION, torch.__version__, dims]).encode())
    update_with_tree(h, model_path)
    return h.hexdigest()[:20]


def load_static_encoder(model_path: str | Path, cache_root: str | Path, *, model: str, dims: int,
                        progress: bool = False, published: str | Path | None = None) -> tuple[StaticEncoder, dict]:  # fmt: skip
    """The static encoder of the model in ``model_path``: the one ``published`` beside a deployment's routers,
    else the one in the machine's cache, else distilled into the cache now; and a report ``{"status":
    "published" | "cached" | "distilled", "path", "reason"}``. One loaded from the cache is published (where
    ``published`` is given) so the deployment's other replicas read it instead of distilling their own."""
    name = f"static-{Path(model_path).name}-{cache_key(model_path, dims)}"
    folder = Path(cache_root) / name
    shared = Path(published) / name if published is not None else None
    for where, status in ((shared, "published"), (folder, "cached")):
        if where is None or not where.exists():
            continue
        try:
            meta = read_static(where, model=model, dims=dims)
        except StaticError as exc:
            log.warning("regret-gateway: the %s static encoder in %s is not whole (%s); it is removed, and read from another "
                        "copy or distilled again", status, where, exc)  # fmt: skip
            shutil.rmtree(where, ignore_errors=True)
            continue
        if shared is not None and where == folder:
            _publish(folder, shared)
        return StaticEncoder(where, meta), {"status": status, "path": str(where), "reason": f"{status} in {where}"}
    Path(cache_root).mkdir(parents=True, exist_ok=True)
    log.warning("regret-gateway: distilling the static encoder of %s into %s (once a machine; ~25 s on 2 cores)", model, folder)
    try:
        meta = distill_static(model_path, folder, model=model, dims=dims, progress=progress)
    except (OSError, StaticError):  # another worker put its distillation there first: use that one
        if not folder.exists():
            raise
        meta = read_static(folder, model=model, dims=dims)
    if shared is not None:
        _publish(folder, shared)
    report = {"status": "distilled", "path": str(folder), "reason": f"distilled from {model} into {folder}"}
    return StaticEncoder(folder, meta), report


def _publish(folder: Path, shared: Path) -> None:
    """Copy the cached encoder ``folder`` to ``shared`` whole (a reader never sees half of it); a replica that
    published it first wins, and a folder that cannot be written is logged, not raised (the cache serves)."""
    if shared.exists():
        return
    try:
        with new_folder(shared) as tmp:
            shutil.copytree(folder, tmp, dirs_exist_ok=True)
    except OSError as exc:
        if not shared.exists():
            log.warning("regret-gateway: the static encoder could not be published in %s (%s)", shared, exc)
