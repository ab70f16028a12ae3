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

from regret_gateway.config.embedder import EmbedderSpec
from regret_gateway.config.judge import DEFAULT_RUBRIC, JudgeSpec
from regret_gateway.config.settings import ENV_PREFIX, ConfigError, Settings, env_var, load_settings, read_yaml
from regret_gateway.config.specs import (
    DEFAULT_STORE_URL,
    BudgetSpec,
    ModelInfoSpec,
    SessionSpec,
    StoreSpec,
    TeamSpec,
    TierSpec,
    TrustSpec,
)

__all__ = [
    "DEFAULT_RUBRIC",
    "DEFAULT_STORE_URL",
    "ENV_PREFIX",
    "BudgetSpec",
    "ConfigError",
    "EmbedderSpec",
    "JudgeSpec",
    "ModelInfoSpec",
    "SessionSpec",
    "Settings",
    "StoreSpec",
    "TeamSpec",
    "TierSpec",
    "TrustSpec",
    "env_var",
    "load_settings",
    "read_yaml",
]
