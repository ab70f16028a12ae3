"""The whole settings object and how it is read: YAML (a file of its own or the proxy's ``regret_gateway:``
section), environment overrides, ``os.environ/VAR`` values, one-line errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from regret_gateway.config.embedder import EmbedderSpec
from regret_gateway.config.judge import JudgeSpec
from regret_gateway.config.specs import ModelInfoSpec, SessionSpec, StoreSpec, TeamSpec, TierSpec, TrustSpec, _Strict


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
    # per model group: its context window, what it takes, its cached input price, over LiteLLM's model info
    model_info: dict[str, ModelInfoSpec] = Field(default_factory=dict)
    # the answer's tokens a request is expected to need where it sets no max_tokens: a model is eligible for
    # it where its window holds the prompt and these (gateway/eligibility.py)
    expected_output_tokens: int = Field(default=256, ge=0)
    sessions: SessionSpec = Field(default_factory=SessionSpec)  # conversations keep their model (gateway/sessions.py)
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
        if unknown := sorted(set(self.model_info) - set(self.models)):
            raise ValueError(f"model_info names models that are not in `models`: {unknown} (models: {list(self.models)})")
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

    def fallback_of(self, tier: str) -> str:
        """The model ``tier`` falls back to (its ``fallback``; default: the first model)."""
        return self.tiers[tier].fallback or self.models[0]

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


SECTION = "regret_gateway"  # the gateway's section of a LiteLLM proxy config


def _did_you_mean(loaded: dict) -> str:
    """`` (is `regret_gatway:` a misspelling of it?)`` for a top-level key close to :data:`SECTION`."""
    import difflib

    close = difflib.get_close_matches(SECTION, [str(k) for k in loaded], n=1, cutoff=0.75)
    return f" (is `{close[0]}:` a misspelling of it?)" if close else " (the gateway's settings: see examples/config.yaml)"


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
        if "model_list" in loaded and SECTION not in loaded:
            raise ConfigError(f"{path}: no `{SECTION}:` section" + _did_you_mean(loaded))
        raw = loaded.get(SECTION, loaded if "model_list" not in loaded else {})
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
