"""The settings' parts: a tier, a team and its budget, the store, whose scores train (every part strict and
frozen: an unknown key or a bad value is refused at load)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_STORE_URL = "sqlite:///regret-gateway.db"


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
    along a ladder (:mod:`regret_gateway.budgets.ladder`) so that its spend lands on the budget, one controller step
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
    budget: BudgetSpec | None = None  # spend steered onto it per period (budgets/; `status` shows it)


class StoreSpec(_Strict):
    url: str = DEFAULT_STORE_URL
    store_prompts: bool = False  # privacy: only embedding + hash unless opted in
    spill_dir: str = ".regret-gateway/spill"
    queue_size: int = Field(default=10_000, ge=1)
    batch_size: int = Field(default=500, ge=1)
    flush_interval_s: float = Field(default=1.0, gt=0)
    retention_days: float | None = Field(default=90.0, gt=0)  # `db prune` deletes decisions older; None: keep all
    # `db prune` drops the embedding of a decision not scored this long after it (it can no longer train: a later
    # score is kept, not trained on); None: keep every embedding until the decision goes
    score_window_days: float | None = Field(default=7.0, gt=0)
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
    # leave out the scores of a team that disagrees with the others' (a reference's where there is one: the judge,
    # `reference`) on the same model and app: its mean differs by at least `min_gap`, beyond chance at `alpha`
    check_agreement: bool = True
    min_gap: float = Field(default=0.2, gt=0, le=1)
    alpha: float = Field(default=0.001, gt=0, lt=1)
    min_rows: int = Field(default=20, ge=2)  # a team's scores on a model, and the others', needed to compare them
    exempt: tuple[str, ...] = ()  # teams never checked (vouched for: e.g. their prompts differ from everyone else's)
    # teams whose scores the operator vouches for as a reference: never checked, and where they (or the judge)
    # scored a model in an app, the other teams are compared with them alone there -- they decide, not a count
    reference: tuple[str, ...] = ()


class ModelInfoSpec(_Strict):
    """What one of ``models`` (a LiteLLM model group) can take and what its cached input costs, where LiteLLM's
    model info (its cost map, a deployment's ``model_info``) does not say it or says it wrong: this wins.
    A limit nobody states is not checked (gateway/eligibility.py)."""

    max_input_tokens: int | None = Field(default=None, ge=1)  # the context window, for the prompt
    max_output_tokens: int | None = Field(default=None, ge=1)
    tools: bool | None = None  # takes tool (function) definitions
    images: bool | None = None  # takes image content parts
    json_schema: bool | None = None  # takes response_format json_schema
    input_cost_per_token: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    cached_input_cost_per_token: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # a cached prompt prefix


class SessionSpec(_Strict):
    """Conversations (gateway/sessions.py): a later turn of a conversation stays on the model its first routed
    turn got unless the router's utility for its choice beats the kept model's by more than switching costs:
    ``lambda`` x the cache the switch loses (the history's tokens x (input price - cached input price)) plus
    ``switch_penalty`` (quality points, 0-1). A conversation is the ``session_id`` of the request's metadata
    (or LiteLLM's ``litellm_session_id``), else a keyed hash of its first messages; it is kept in each worker's
    memory for ``ttl_s`` after its last turn, at most ``max_sessions`` of them."""

    keep: bool = True  # false: every turn is routed afresh
    switch_penalty: float = Field(default=0.02, ge=0, le=1)
    ttl_s: float = Field(default=3600.0, gt=0)
    max_sessions: int = Field(default=100_000, ge=1)
