"""The running gateway: one object built at start-up and handed to the hook, the routes and auth.

:class:`Gateway` holds the settings, the store engine, the batched writer, the embedding batcher, the
active router, the budget steerer (gateway/steering.py), the sampling RNG and the counters. ``start()`` (idempotent, thread-safe) loads the
embedder and warms it, opens the store (migrating it under a database lock, see
:func:`regret_gateway.store.migrate.upgrade`), starts the writer and loads the active router.
With a ``judge:`` model it also holds the sampled LLM judge (:mod:`regret_gateway.judge.sampled`).
``maybe_reload()`` looks for a newly published version at most every ``reload_interval_s`` and loads it
in a worker thread, never on the event loop: requests keep routing with the current version meanwhile. A
timer thread calls it every ``reload_interval_s`` from ``start()`` on, so an idle gateway loads a new
version before its next request, not with it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from regret_gateway.budgets.ladder import Ladder
from regret_gateway.config import Settings
from regret_gateway.gateway.batcher import EmbeddingBatcher
from regret_gateway.gateway.decisions import ActiveRouter, Choice
from regret_gateway.gateway.eligibility import Eligibility
from regret_gateway.gateway.metrics import GatewayMetrics
from regret_gateway.gateway.model_info import group_info, proxy_model_list
from regret_gateway.gateway.sessions import Sessions, Turn, lost_cache_usd
from regret_gateway.gateway.single_flight import SingleFlight
from regret_gateway.gateway.stats import COUNTERS, GatewayStats
from regret_gateway.gateway.steering import Steerer, published_ladder
from regret_gateway.limits import ModelInfo
from regret_gateway.store.engine import make_engine
from regret_gateway.store.migrate import upgrade
from regret_gateway.store.writer import BatchedWriter
from regret_gateway.tokens import count_message_tokens, count_tokens

if TYPE_CHECKING:
    from regret_gateway.judge.sampled import Judge

log = logging.getLogger(__name__)
T = TypeVar("T")

STORE_WORKERS = 4  # threads for the /regret/* routes' database calls
EMBEDDER_RETRY_S = 30.0  # how often a gateway whose embedder failed to load tries again


class Gateway:
    """Everything the gateway runs on.

    Args:
        settings: the deployment's settings.
        encode: ``texts -> (n, d)`` embedding function (default: the configured embedder).
        engine: an SQLAlchemy engine (default: one for ``settings.store.url``, migrated at start).
        spill_dir: where the writer spills during a database outage (default: the settings').
        seed: seed of the exploration RNG (and the judge's sampling).
        judge_complete: how the LLM judge's model is called (default: through LiteLLM; the demo's replay
            passes its mock).
        clock: the wall clock (UTC) decisions are stamped with and budget steering reads (default: now; the
            demo's budget days pass a simulated one).
        model_list: the LiteLLM deployments whose model info says what each model can take, read at start
            (default: the running proxy's ``model_list``, read at the first routed request).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        encode: Callable[[Sequence[str]], np.ndarray] | None = None,
        engine=None,
        spill_dir: str | None = None,
        seed: int | None = None,
        judge_complete=None,
        clock: Callable[[], datetime] | None = None,
        model_list: list[dict] | None = None,
    ) -> None:
        self.settings = settings
        self._model_list = model_list
        self._eligibility: Eligibility | None = None
        self.sessions = Sessions(settings.sessions)  # this worker's conversations and their models
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._seeds = np.random.SeedSequence(seed)  # the routing stream, and independent children (the judge's)
        self.rng = np.random.default_rng(self._seeds)
        self.metrics = GatewayMetrics(COUNTERS, self)  # the counters, and what /regret/metrics shows
        self._encode = encode
        self._own_embedder = False  # the configured Embedder (not an encode function passed in)
        self._embedder_lock = threading.Lock()
        self._embedder_ready = False
        self._next_embedder_try = 0.0
        self.embedder_error: str | None = None
        self.engine = engine
        self._lock = threading.Lock()
        self._started = False
        self._reloading = threading.Event()
        self._closing = threading.Event()  # stops the reload timer
        # The /regret/* routes' store calls run here, never in the event loop's default pool that LiteLLM and
        # the embedder share: a slow or hung database fills this pool, not theirs.
        self.store_pool = ThreadPoolExecutor(max_workers=STORE_WORKERS, thread_name_prefix="regret-gateway-store")
        self.reports: SingleFlight[str] = SingleFlight()  # GET /regret/report's pages, one computation at a time
        self._last_reload = 0.0
        if len(settings.models) < 2:
            raise ValueError("regret_gateway.models must list at least 2 LiteLLM model groups to route between")
        self._own_engine = engine is None  # migrated at start
        if self.engine is None:
            self.engine = make_engine(settings.store.url, statement_timeout_ms=int(1000 * settings.store_timeout_s))
        self.writer = BatchedWriter(
            self.engine,
            spill_dir or settings.store.spill_dir,
            queue_size=settings.store.queue_size,
            batch_size=settings.store.batch_size,
            flush_interval_s=settings.store.flush_interval_s,
        )
        self.router = ActiveRouter(settings)
        self.steerer = Steerer(settings, lambda: self.engine, clock=self._clock,
                               on_costs=self.router.costs_seen,
                               ladder_of=self._budget_ladder)  # fmt: skip
        self.hash_key = settings.prompt_hash_key()
        self.batcher = EmbeddingBatcher(
            self._embed,
            cache_size=settings.embedder.cache_size,
            max_tokens=settings.embedder.max_length,
            truncation=settings.embedder.truncation,
            encode_busy=partial(self._embed, busy=True),
            # the static encoder, once loaded, embeds on the loop: ~0.1-3 ms a prompt, less than a thread's hops
            inline=lambda: self._embedder_ready and self._own_embedder and settings.embedder.kind == "static",
        )
        self.judge: Judge | None = None  # the sampled LLM judge (judge/sampled.py), when judge.model is set
        if settings.judge.model is not None:
            from regret_gateway.judge.sampled import Judge

            # a child stream: a gateway with a judge draws the same exploration as one without (paired replays)
            judge_rng = np.random.default_rng(self._seeds.spawn(1)[0])
            self.judge = Judge(settings, self.writer.submit, complete=judge_complete, rng=judge_rng)

    def _budget_ladder(self, team: str, kind: str) -> Ladder | None:
        """The active router's ``kind`` ladder for a budgeted team (``retrain`` publishes them beside the
        tiers; a team it did not value gets everyone's), without its dominated
        rungs where the team's budget says so; None before any."""
        budget = self.settings.teams[team].budget
        return published_ladder(self.router.artifact, team, kind, budget is not None and budget.drop_dominated)

    @property
    def eligibility(self) -> Eligibility:
        """What each model can take (gateway/eligibility.py), from the proxy's deployments' model info under
        the settings' ``model_info``; built at first use (the proxy's router exists by then)."""
        if self._eligibility is None:
            model_list = self._model_list if self._model_list is not None else proxy_model_list()
            self._eligibility = Eligibility(self.settings, group_info(model_list, self.settings))
        return self._eligibility

    def session_step(self, turn: Turn | None, allowed: np.ndarray | None, choice: Choice, x: np.ndarray | None,
                     tier: str, lam: float, messages, *, team: str | None = None, position: float | None = None,
                     prompt_tokens: float | None = None) -> tuple[Choice, str | None]:  # fmt: skip
        """A request's ``turn`` of its conversation (gateway/sessions.py), among the ``allowed`` models that can
        take it: ``choice`` kept on the conversation's model or let through, and its ``session_turn``. The
        tier's cost cap and the ``team``'s budget ``position`` bound a kept turn as they bound a new request
        (:meth:`ActiveRouter.permitted`, asked only of a later turn with a model to keep)."""
        info = self.eligibility.info

        def lost(model: str) -> float:
            known = info.get(model, ModelInfo())
            if known.input_cost_per_token is None or known.cached_input_cost_per_token is None:
                return 0.0
            history = messages[:-1] if isinstance(messages, list) else None  # the prefix a provider caches
            return lost_cache_usd(known, count_message_tokens(history))

        def utilities():
            return None if x is None else self.router.utilities(x, tier, lam)

        def permitted():
            if x is None:  # routing failed before an embedding: nothing to predict a cost from
                return None
            return self.router.permitted(self.router.artifact, x[None, :], tier, position=position,
                                         ladder=self.steerer.ladder(team), cheapest=self.steerer.cheapest,
                                         prompt_tokens=prompt_tokens)  # fmt: skip

        return self.sessions.step(turn, choice, models=self.settings.models, allowed=allowed,
                                  utilities=utilities, lam=lam, lost_usd=lost, permitted=permitted)  # fmt: skip

    def now(self) -> datetime:
        """The gateway's clock (UTC): decisions are stamped with it, budgets' periods and steps read it."""
        return self._clock()

    @property
    def started(self) -> bool:
        return self._started

    def start(self) -> "Gateway":
        """Migrate the store, start the writer, load the router and the embedder: every field is built by the
        constructor, this starts what runs (threads, files, the database). Safe to call again.

        Never fails for what can heal: a database unreachable at start is logged (the writer spills and
        replays when it is back; migrations run at the next start or by ``db upgrade``), and an embedder
        that cannot be loaded is logged and retried at most every ``EMBEDDER_RETRY_S`` -- meanwhile every
        routed request goes to its tier's fallback model (fail open), none is failed."""
        with self._lock:
            if self._started:
                return self
            if self._own_engine:
                try:
                    upgrade(self.settings.store.url)  # idempotent, under a database lock: workers starting together migrate once
                except Exception as exc:  # noqa: BLE001 - the store may come back; requests must not wait for it
                    log.error("regret-gateway: the store is unreachable at start (%s); decisions are spilled and "
                              "replayed when it is back", str(exc).splitlines()[0])  # fmt: skip
            self.writer.start()
            self._started = True
        self._load_embedder()
        self.router.refresh()
        if self._model_list is not None:
            self.eligibility  # noqa: B018 - built now (LiteLLM's model info), not inside the first request
            count_message_tokens([{"role": "user", "content": "warm-up"}])  # loads LiteLLM's tokenizer (~0.25 s)
        self._last_reload = time.monotonic()
        threading.Thread(target=self._reload_timer, name="regret-gateway-reload-timer", daemon=True).start()
        return self

    def _reload_timer(self) -> None:
        """Look for a newly published version every ``reload_interval_s`` whether or not requests come: an idle
        gateway serves the new router from its next request on (requests look too, between two ticks)."""
        while not self._closing.wait(self.settings.reload_interval_s):
            self.maybe_reload()

    def _load_embedder(self) -> bool:
        """Load and warm the embedder (once); on failure log it and allow a retry after EMBEDDER_RETRY_S."""
        with self._embedder_lock:
            if self._embedder_ready:
                return True
            if time.monotonic() < self._next_embedder_try:
                return False
            s = self.settings
            try:
                if self._encode is None:
                    from regret_gateway.encoders.embedder import Embedder

                    # the hook renders the request's context template (context.render) before embedding
                    self._encode = Embedder.from_settings(s, progress=True).encode  # a distillation shows its progress
                    self._own_embedder = True
                warm = np.asarray(self._encode(["warm-up"]))  # load now, not inside the first request's budget
            except Exception as exc:  # noqa: BLE001 - fail open: requests go to their tier's fallback
                self.embedder_error = f"{type(exc).__name__}: {exc}"
                self._next_embedder_try = time.monotonic() + EMBEDDER_RETRY_S
                log.error("regret-gateway: the embedder cannot be loaded (%s); routed requests go to their tier's "
                          "fallback until it loads (next try in %.0f s)", self.embedder_error, EMBEDDER_RETRY_S)  # fmt: skip
                return False
            code = s.embedder.context_code
            size = s.embedder.size
            self.router.active.embedding_dim = int(warm.shape[-1]) + (code.dim if code is not None else 0) + (size is not None)
            report = self.embedding_report
            label, why = self.embedding_label, f" ({report.get('status')}: {report.get('reason')})" if report else ""
            where = "the encoder passed in" if label is None else f"{label} on {self.embedding_device}"
            log.warning("regret-gateway: embedding with %s%s", where, why)
            self.embedder_error = None
            self._embedder_ready = True
            return True

    @property
    def embedding_device(self) -> str | None:
        """Where the configured embedder runs (cuda / cpu), once loaded."""
        return getattr(getattr(self._encode, "__self__", None), "_device", None)

    @property
    def embedding_backend(self) -> str | None:
        """What runs the configured embedder (static / torch / onnx / onnx-int8), once loaded."""
        return getattr(getattr(self._encode, "__self__", None), "backend_used", None)

    @property
    def embedding_report(self) -> dict:
        """The configured embedder's ONNX export report (status, agreement, graph; {} for none), once loaded."""
        return getattr(getattr(self._encode, "__self__", None), "backend_report", {}) or {}

    @property
    def embedding_threads(self) -> int | None:
        """Threads of one ONNX forward pass as configured (None: ONNX Runtime's default, torch, or not loaded)."""
        if self.embedding_backend in (None, "torch", "static"):
            return None
        return getattr(getattr(self._encode, "__self__", None), "threads", None)

    @property
    def embedding_label(self) -> str | None:
        """The backend with its ONNX graph (torch: traced or eager) and any configured thread count and depth,
        e.g. ``onnx, fused graph, 1 thread``, ``onnx, plain graph, 3 layers`` or ``torch, traced`` (the log and
        bench say this)."""
        if self.embedding_backend is None:
            return None
        n, depth = self.embedding_threads, self.settings.embedder.layers
        report = self.embedding_report
        graph = [f"{report['graph']} graph"] if self.embedding_backend.startswith("onnx") and report.get("graph") else []
        if self.embedding_backend == "torch":
            graph = ["traced" if getattr(getattr(self._encode, "__self__", None), "traced", False) else "eager"]
        parts = [self.embedding_backend, *graph, *([f"{n} thread{'s' if n > 1 else ''}"] if n else [])]
        return ", ".join(parts + ([f"{depth} layer{'s' if depth > 1 else ''}"] if depth else []))

    def _embed(self, texts: Sequence[str], busy: bool = False) -> np.ndarray:
        """The batcher's encoder (runs in a worker thread): the embedder, loaded on demand when it failed before.
        ``busy``: a batch that starts right after another (under load) takes the configured embedder's busy
        pass (ONNX Runtime on half the cores, ``Embedder.encode(busy=True)``), leaving the proxy's event loop
        the rest; an encode function passed in is called as it is."""
        if not self._embedder_ready and not self._load_embedder():
            raise RuntimeError(f"the embedder is unavailable ({self.embedder_error})")
        assert self._encode is not None
        if busy and self._own_embedder:
            return self._encode(texts, busy=True)  # type: ignore[call-arg]
        return self._encode(texts)

    def features(self, embedding: np.ndarray, context: dict | None, text: str = "") -> np.ndarray:
        """What the router reads for one request: its embedding, with the code of its context appended when
        ``embedder.context`` is set (context.ContextCode), then the size of its routed ``text`` when
        ``embedder.size_feature`` is (context.SizeFeature; tokens.count_tokens)."""
        x = np.asarray(embedding, dtype=np.float32)[None, :]
        spec = self.settings.embedder
        if (code := spec.context_code) is not None:
            x = code.append(x, [context])
        if (size := spec.size) is not None:
            x = size.append(x, count_tokens([text]))
        return x[0]

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

    async def run_store(self, fn: Callable[..., T], *args) -> T:
        """``fn(*args)`` on the store pool, at most ``store_timeout_s``; raises TimeoutError past it."""
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(loop.run_in_executor(self.store_pool, fn, *args), self.settings.store_timeout_s)

    def close(self, timeout: float = 30.0) -> None:
        """Flush and stop the writer (what is still queued is written or spilled) and the encoder's thread."""
        self._closing.set()
        if self._started:
            self.writer.close(timeout=timeout)
            self.batcher.close()

    def stats(self) -> GatewayStats:
        """This worker's counters since it started."""
        return GatewayStats(
            **self.metrics.counters,
            router_version=getattr(self.router.artifact, "version", None),
            router_reloads=self.router.active.reloads,
            unpublished_tier=self.router.unpublished,
            sessions=len(self.sessions),
            embedding_backend=self.embedding_backend,
            embedding_batches=self.batcher.batches,
            embedding_cache_hits=self.batcher.cache_hits,
            embedding_shortened=self.batcher.shortened,
            embedding_inlined=self.batcher.inlined,
            writer=self.writer.stats(),
            judge=self.judge.stats() if self.judge is not None else None,
        )
