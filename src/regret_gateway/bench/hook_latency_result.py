"""What ``bench gateway`` measured: per cell (prompt set x concurrency) each target's pooled load and what
the hook added to plain LiteLLM, with each hook's counters at the end; :meth:`GatewayBench.table` renders it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from regret_gateway.gateway.stats import GatewayStats


@dataclass(frozen=True)
class Pooled:
    """Repeated loads of one target as one (:func:`regret_gateway.bench.hook_latency.pool`)."""

    requests: int
    p50_ms: float
    p99_ms: float
    rps: float
    cpu_ms: float


@dataclass(frozen=True)
class HookCost:
    """What the hook added to plain LiteLLM sending the same requests to the models it chose."""

    pair_ratios: list[float]  # plain / hook seconds, repeat by repeat (the same requests each)
    ratio: float  # throughput, hook / plain
    ratio_one_model: float  # throughput, hook / plain LiteLLM serving one model
    added_p50_ms: float
    added_p99_ms: float
    added_cpu_ms: float
    fallbacks: int
    shed: int  # sent to the fallback at once
    shortened: int  # embedded from their first overload_max_length tokens
    timeouts: int  # waited out the budget (or the embedder failed)
    routed_share: float


@dataclass(frozen=True)
class LoadRow:
    """One target of one cell (prompt set x concurrency): the hook, or plain LiteLLM."""

    prompts: str
    target: str
    backend: str  # the hook's encoder; "-" for plain LiteLLM
    concurrency: int
    load: Pooled
    hook: HookCost | None = None  # the hook's row only


@dataclass(frozen=True)
class GatewayBench:
    """``bench gateway``'s result: the rows of every cell, each hook's counters at the end, where it ran."""

    rows: list[LoadRow]
    hooks: dict[str, GatewayStats] = field(default_factory=dict)
    device: str = ""
    backends: dict[str, str | None] = field(default_factory=dict)

    def table(self) -> str:
        lines = ["| prompts | target | backend | concurrency | requests | p50 ms | p99 ms | req/s | added p50 ms | added p99 ms | "
                 "throughput ratio | of single repeats | ratio to one model | routed | read short | shed | timed out | CPU ms/req | "
                 "added CPU ms |",
                 "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for r in self.rows:
            x, h = r.load, r.hook
            if h is not None:
                pairs = ", ".join(f"{v:.2f}" for v in h.pair_ratios)
                added = (f"{h.added_p50_ms:+.1f} | {h.added_p99_ms:+.1f} | {h.ratio:.2f} | {pairs} | {h.ratio_one_model:.2f} | "
                         f"{h.routed_share:.0%} | {h.shortened} | {h.shed} | {h.timeouts}")  # fmt: skip
                cpu = f"{x.cpu_ms:.1f} | {h.added_cpu_ms:+.1f}"
            else:
                added, cpu = "- | - | - | - | - | - | - | - | -", f"{x.cpu_ms:.1f} | -"
            lines.append(f"| {r.prompts} | {r.target} | {r.backend} | {r.concurrency} | {x.requests} | "
                         f"{x.p50_ms:.1f} | {x.p99_ms:.1f} | {x.rps:.1f} | {added} | {cpu} |")  # fmt: skip
        for backend, hook in self.hooks.items():
            lines.append(f"hook ({backend}): routed={hook.routed} fallback={hook.fallback} shed={hook.shed} "
                         f"exploration={hook.exploration} embedding batches={hook.embedding_batches} written={hook.writer.written}")  # fmt: skip
        return "\n".join(lines)
