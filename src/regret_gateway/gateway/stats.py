"""A worker's counters: what the hook counts (:data:`COUNTERS`) and :class:`GatewayStats`, everything
``GET /regret/stats`` answers (the counters, the router, the embedder, the store writer, the LLM judge)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

from regret_gateway.store.writer import WriterStats

if TYPE_CHECKING:
    from regret_gateway.judge.sampled import JudgeStats

COUNTERS = (
    "routed",
    "fallback",
    "shed",
    "timed_out",
    "exploration",
    "cold_start",
    "passthrough",
    "forbidden",
    "unlogged",
    "retried",
    "restricted",
    "ineligible",
    "session_kept",
    "session_rerouted",
)


@dataclass(frozen=True)
class GatewayStats:
    """A worker's counters since it started: how requests were routed (``COUNTERS``), the router, the
    embedder, the store writer and the LLM judge. ``GET /regret/stats`` answers :meth:`to_dict`."""

    routed: int  # requests for the virtual model that got a model (fallbacks included)
    fallback: int  # of them, sent to the tier's fallback (embedder or router unavailable, shed, timed out)
    shed: int  # sent to the fallback at once: the encoder was busy
    timed_out: int  # waited out the route timeout, then fell back
    exploration: int  # of the routed, an exploration draw
    cold_start: int  # of the routed, before any router was published
    passthrough: int  # named a model directly (not routed)
    forbidden: int  # refused with 403 (a tier or model the team may not use)
    unlogged: int  # answered but no decision logged
    retried: int  # answered after LiteLLM retried the upstream call
    restricted: int  # some model could not take the request: chosen among those that could
    ineligible: int  # no model could take the request: refused with 400
    session_kept: int  # a later turn of a conversation kept on its model
    session_rerouted: int  # a later turn routed afresh (its model could not take it, or a switch was worth its cost)
    router_version: str | None
    router_reloads: int
    sessions: int  # conversations this worker keeps a model for
    unpublished_tier: int  # of the fallbacks, a tier the active router holds no policy for (added since its retrain)
    embedding_backend: str | None  # static / torch / onnx / onnx-int8, once loaded
    embedding_batches: int
    embedding_cache_hits: int
    embedding_shortened: int  # read from their first overload_max_length tokens
    embedding_inlined: int  # embedded on the event loop (the static encoder), no batch
    writer: WriterStats
    judge: JudgeStats | None  # None: no judge configured

    def to_dict(self) -> dict:
        """Flat JSON: the counters, then ``writer_*`` and ``judge_*`` for the writer's and judge's."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("writer", "judge")}
        out.update({f"writer_{k}": v for k, v in asdict(self.writer).items()})
        if self.judge is not None:
            out.update({f"judge_{k}": v for k, v in asdict(self.judge).items()})
        return out
