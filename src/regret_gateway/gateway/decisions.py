"""Routing decisions with exact propensities: policy + epsilon exploration, cold start, fallback, and the
active router that is swapped in atomically when a new version is published.

Policy decision for tier lambda: the router's argmax t* over the tier's models, then with probability
epsilon a uniformly random model instead. The probability of the chosen model t is exactly
``(1 - eps) * 1[t = t*] + eps / T`` -- the propensity logged for off-policy learning.
Cold start (no router yet): uniform over the models (p = 1/T), or a configured default model.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from regret_gateway.artifacts import ArtifactError, RouterArtifact, active_version_id, load_artifact
from regret_gateway.config import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Choice:
    model: str
    propensity: float
    mode: str  # policy | exploration | cold_start | fallback
    router_version: str | None
    scores: dict[str, float] | None = None


def fallback_model(settings: Settings, tier: str) -> str:
    return settings.tiers[tier].fallback or settings.models[0]


class ActiveRouter:
    """Holds the serving router; ``refresh()`` loads a newly activated version from the artifact folder.
    A version that fails to load is refused with a log line and the current one stays."""

    def __init__(self, settings: Settings, embedding_dim: int | None = None):
        self.settings = settings
        self.embedding_dim = embedding_dim  # the running embedder's; an artifact of another size is refused
        self.root = Path(settings.artifacts_dir)
        self._artifact: RouterArtifact | None = None
        self._refused: set[str] = set()
        self._lock = threading.Lock()
        self.reloads = 0

    @property
    def artifact(self) -> RouterArtifact | None:
        return self._artifact

    def refresh(self) -> bool:
        """Swap in the version named by ``ACTIVE`` if it is new. Returns True when a swap happened."""
        version = active_version_id(self.root)
        current = self._artifact.version if self._artifact else None
        if version is None or version == current or version in self._refused:
            return False
        with self._lock:
            try:
                artifact = load_artifact(
                    self.root / version,
                    models=self.settings.models,
                    embedder_model=self.settings.embedder.model,
                    embedding_dim=self.embedding_dim,
                )
            except ArtifactError as exc:
                self._refused.add(version)
                log.error("regret-gateway: refusing router version %s, keeping %s: %s", version, current, exc)
                return False
            self._artifact = artifact  # one reference assignment: requests see the old or the new router
            self.reloads += 1
            log.warning("regret-gateway: now routing with version %s (was %s)", version, current)
            return True

    def choose(self, x: np.ndarray, tier: str, rng: np.random.Generator) -> Choice:
        settings = self.settings
        spec = settings.tiers[tier]
        models = settings.models
        artifact = self._artifact
        if artifact is None:
            if settings.cold_start == "fallback":
                return Choice(fallback_model(settings, tier), 1.0, "cold_start", None)
            t = int(rng.integers(len(models)))
            return Choice(models[t], 1.0 / len(models), "cold_start", None)
        logits = artifact.logits(x[None, :], spec.lam)[0]
        scores = {m: float(v) for m, v in zip(artifact.model_names, logits)}
        best = artifact.model_names[int(np.argmax(logits))]
        eps, T = spec.epsilon, len(models)
        explore = eps > 0 and rng.random() < eps
        chosen = models[int(rng.integers(T))] if explore else best
        propensity = (1.0 - eps) * (chosen == best) + eps / T
        return Choice(
            chosen, float(propensity), "exploration" if explore and chosen != best else "policy", artifact.version, scores
        )
