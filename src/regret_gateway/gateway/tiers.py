"""Who is asking and at which cost tier: team -> tier, and whether a request may ask for another tier."""

from __future__ import annotations

from regret_gateway.config import Settings


def team_of(settings: Settings, auth) -> str | None:
    """The team a LiteLLM key belongs to, as the gateway names it (its tier, budget, logs, feedback): the
    ``teams:`` entry its LiteLLM team id or team alias names (LiteLLM's database generates team ids, so a
    platform names its teams there by alias), else the team id itself (``custom_auth``'s team names)."""
    team_id = getattr(auth, "team_id", None)
    alias = getattr(auth, "team_alias", None)
    if team_id is not None and team_id not in settings.teams and isinstance(alias, str) and alias in settings.teams:
        return alias
    return team_id


class TierNotAllowed(PermissionError):
    """A request asked for a tier its team may not use (HTTP 403)."""


class BadTierRequest(ValueError):
    """A request's ``regret_tier`` is not a tier name (HTTP 400)."""


def resolve_tier(settings: Settings, team: str | None, team_metadata: dict | None = None, requested: str | None = None) -> str:
    """The tier of a request.

    Own tier: LiteLLM's team metadata ``regret_tier``, else the config's ``teams`` map, else
    ``default_tier``. ``requested`` (the request's ``regret_tier``) is granted when it is the own tier or
    listed in the team's ``allowed_tiers`` (config) / ``regret_allowed_tiers`` (team metadata)."""
    if requested is not None and not isinstance(requested, str):
        raise BadTierRequest(f"`regret_tier` must be a tier name (a string), got {type(requested).__name__}")
    meta = team_metadata if isinstance(team_metadata, dict) else {}
    spec = settings.teams.get(team) if team is not None else None
    own = meta.get("regret_tier") or (spec.tier if spec else settings.default_tier)
    if own not in settings.tiers:
        raise TierNotAllowed(f"team {team!r} is on tier {own!r}, which is not configured (tiers: {sorted(settings.tiers)})")
    if requested is None or requested == own:
        return own
    allowed = set(meta.get("regret_allowed_tiers") or ()) | set(spec.allowed_tiers if spec else ())
    if requested not in settings.tiers:
        raise TierNotAllowed(f"unknown tier {requested!r} (tiers: {sorted(settings.tiers)})")
    if requested not in allowed:
        raise TierNotAllowed(
            f"team {team!r} may not use tier {requested!r} (its tier: {own!r}, allowed: {sorted(allowed) or 'none'})"
        )
    return requested
