"""The running gateway: one object built at start-up and handed to the hook, the routes and auth.

:class:`Gateway` holds the settings, the store engine, the batched writer, the embedding batcher, the
active router, the sampling RNG and the counters. ``start()`` (idempotent, thread-safe) loads the
embedder and warms it, opens the store (migrating it under a database lock, see
:func:`regret_gateway.store.migrate.upgrade`), starts the writer and loads the active router.
``maybe_reload()`` looks for a newly published version at most every ``reload_interval_s`` and loads it
in a worker thread, never on the event loop: requests keep routing with the current version meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from regret_gateway.config import Settings

log = logging.getLogger(__name__)

COUNTERS = ("routed", "fallback", "exploration", "cold_start", "passthrough", "forbidden")


class Gateway:
    """Everything the gateway runs on.

    Args:
        settings: the deployment's settings.
        encode: ``texts -> (n, d)`` embedding function (default: the configured embedder).
        engine: an SQLAlchemy engine (default: one for ``settings.store.url``, migrated at start).
        spill_dir: where the writer spills during a database outage (default: the settings').
        seed: seed of the exploration RNG.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        encode: Callable[[Sequence[str]], np.ndarray] | None = None,
        engine=None,
        spill_dir: str | None = None,
        seed: int | None = None,
    ) -> None:
        self.settings = settings
        self.rng = np.random.default_rng(seed)
        self.counters = dict.fromkeys(COUNTERS, 0)
        self._encode = encode
        self.engine = engine
        self._spill_dir = spill_dir
        self._lock = threading.Lock()
        self._started = False
        self._reloading = threading.Event()
        self._last_reload = 0.0

    @property
    def started(self) -> bool:
        return self._started

    def start(self) -> "Gateway":
        """Load the embedder, open the store, start the writer, load the router. Safe to call again."""
        with self._lock:
            if self._started:
                return self
            from regret_gateway.gateway.batcher import EmbeddingBatcher
            from regret_gateway.gateway.decisions import ActiveRouter
            from regret_gateway.store.engine import make_engine
            from regret_gateway.store.migrate import upgrade
            from regret_gateway.store.writer import BatchedWriter

            s = self.settings
            if len(s.models) < 2:
                raise ValueError("regret_gateway.models must list at least 2 LiteLLM model groups to route between")
            if self._encode is None:
                from regret_gateway.embedding import PAPER_TEMPLATE, Embedder

                embedder = Embedder(
                    s.embedder.model,
                    device=s.embedder.device,
                    max_length=s.embedder.max_length,
                    template=PAPER_TEMPLATE if s.embedder.paper_template else None,
                    progress=False,
                )
                self._encode = embedder.encode
            self._encode(["warm-up"])  # load the model now, not inside the first request's time budget
            self.batcher = EmbeddingBatcher(self._encode)
            if self.engine is None:
                upgrade(s.store.url)  # idempotent, under a database lock: workers starting together migrate once
                self.engine = make_engine(s.store.url)
            self.writer = BatchedWriter(
                self.engine,
                self._spill_dir or s.store.spill_dir,
                queue_size=s.store.queue_size,
                batch_size=s.store.batch_size,
                flush_interval_s=s.store.flush_interval_s,
            ).start()
            self.router = ActiveRouter(s)
            self.router.refresh()
            self._last_reload = time.monotonic()
            self._started = True
            return self

    def maybe_reload(self) -> None:
        """If ``reload_interval_s`` has passed, look for a new active version in a worker thread."""
        if self._reloading.is_set() or time.monotonic() - self._last_reload < self.settings.reload_interval_s:
            return
        self._last_reload = time.monotonic()
        self._reloading.set()

        def reload() -> None:
            try:
                self.router.refresh()
            except Exception:  # noqa: BLE001 - a reload must never take the gateway down
                log.exception("regret-gateway: router reload failed; the current version keeps serving")
            finally:
                self._reloading.clear()

        threading.Thread(target=reload, name="regret-gateway-reload", daemon=True).start()

    def close(self) -> None:
        """Flush and stop the writer (what is still queued is written or spilled)."""
        if self._started:
            self.writer.close()

    def stats(self) -> dict:
        out: dict = dict(self.counters)
        if self._started:
            out.update({f"writer_{k}": v for k, v in self.writer.stats().items()})
            out["router_version"] = getattr(self.router.artifact, "version", None)
            out["router_reloads"] = self.router.reloads
            out["embedding_batches"] = self.batcher.batches
        return out
