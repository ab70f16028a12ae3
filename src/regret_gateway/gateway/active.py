"""The router version the gateway serves: the one ``ACTIVE`` names, loaded from the artifact folder and swapped
in atomically (one reference assignment: a request sees the old version or the new one). A version that fails
to load is refused once, with a log line, and the current one stays."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from regret_gateway.artifacts import ArtifactError, RouterArtifact, active_version_id, load_artifact, version_folder
from regret_gateway.config import Settings

log = logging.getLogger(__name__)


class ActiveVersion:
    """The served artifact (``artifact``: None before the first publish); ``refresh()`` swaps in a newly
    activated version; ``columns(artifact)`` places its models in ``settings.models``."""

    def __init__(self, settings: Settings, embedding_dim: int | None = None):
        self.settings = settings
        self.embedding_dim = embedding_dim  # the running embedder's; an artifact of another size is refused
        self.root = Path(settings.artifacts_dir)
        self.artifact: RouterArtifact | None = None
        self.reloads = 0
        self._refused: set[str] = set()
        self._lock = threading.Lock()
        self._column_map: tuple[RouterArtifact, np.ndarray] | None = None

    def refresh(self) -> bool:
        """Swap in the version named by ``ACTIVE`` if it is new. Returns True when a swap happened."""
        with self._lock:  # the reload timer's and a caller's refresh load a version once between them
            version = active_version_id(self.root)
            current = self.artifact.version if self.artifact else None
            if version is None or version == current or version in self._refused:
                return False
            try:
                artifact = load_artifact(
                    version_folder(self.root, version),
                    models=self.settings.models,
                    embedder_model=self.settings.embedder.embedding_id,
                    embedding_dim=self.embedding_dim,
                    lams=tuple(spec.lam for spec in self.settings.tiers.values()),
                )
            except ArtifactError as exc:
                self._refused.add(version)
                log.error("regret-gateway: refusing router version %s, keeping %s: %s", version, current, exc)
                return False
            self.artifact = artifact
            self.reloads += 1
            log.warning("regret-gateway: now routing with version %s (was %s)", version, current)
            if missing := sorted(set(self.settings.tiers) - set(artifact.router.tiers)):
                log.warning("regret-gateway: version %s holds no policy for tier(s) %s: their requests go to their "
                            "fallback model until a retrain publishes one", version, ", ".join(missing))  # fmt: skip
            return True

    def columns(self, artifact: RouterArtifact) -> np.ndarray:
        """Where each of the artifact's models sits in ``settings.models`` (computed once per version)."""
        cached = self._column_map
        if cached is None or cached[0] is not artifact:
            cached = (artifact, np.array([self.settings.models.index(m) for m in artifact.model_names]))
            self._column_map = cached
        return cached[1]
