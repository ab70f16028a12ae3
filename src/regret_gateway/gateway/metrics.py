"""The gateway's live metrics in Prometheus' text format (``GET /regret/metrics``, the proxy admin's key):
what the hook counts as it routes, what it spends, how long it takes, and -- read at each scrape -- the
writer, the judge, the budgets and the router it serves. One :class:`GatewayMetrics` per gateway (its own
registry: two gateways in one process never mix their numbers). LiteLLM's own Prometheus integration owns
``/metrics`` when it is enabled; both can be scraped side by side.

Names follow Prometheus' conventions (``regret_gateway_`` prefix, base units, ``_total`` on counters):

* ``regret_gateway_requests_total{tier, outcome}``: each request the hook saw, once, by what it did
  (:data:`OUTCOMES`: routed, passthrough -- a model named directly, ``tier=""`` --, forbidden, ineligible):
  summing over ``outcome`` counts requests.
* ``regret_gateway_routing_events_total{tier, event}``: what happened inside routed requests (fallback,
  shed, timed_out, exploration, cold_start, restricted, session_kept, session_rerouted, retried, unlogged);
  one request may have several (a shed request is a fallback too): do not sum them.
* ``regret_gateway_chosen_model_total{tier, model, mode}``: where routed requests went (mode: policy,
  exploration, cold_start, fallback).
* ``regret_gateway_spend_usd_total{team, tier, model}``: what the answers cost, as LiteLLM priced them
  (a mock upstream's answers, ``serve --mock-upstream``, are not spend and are not counted).
* ``regret_gateway_hook_seconds`` and ``regret_gateway_embedding_seconds``: histograms of the time the
  hook adds to a routed request and of the embedding inside it.
* read at each scrape: ``regret_gateway_writer_queue_depth``, ``regret_gateway_writer_records_total{result}``
  (written, spilled, replayed, dropped, refused), ``regret_gateway_database_down``,
  ``regret_gateway_judge_queue_depth``, ``regret_gateway_judge_answers_total{result}``,
  ``regret_gateway_judge_spend_usd_total``, ``regret_gateway_sessions``, ``regret_gateway_team_lambda{team}``
  and ``regret_gateway_team_budget_usd{team, per}``, ``regret_gateway_router_info{version}``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)  # the hook's budget is 0.25 s
OUTCOMES = ("routed", "passthrough", "forbidden", "ineligible")  # one per request: the requests counter's outcomes
_WRITER = ("written", "spilled", "replayed", "dropped", "refused")
_JUDGE = ("sampled", "scored", "failed", "timeouts", "unparsable", "dropped")


class GatewayMetrics:
    """One gateway's counters (``counters``: totals, what ``/regret/stats`` shows) and its Prometheus registry;
    the rest is read from ``gateway`` at each scrape."""

    def __init__(self, names: tuple[str, ...], gateway: Any) -> None:  # the runtime.Gateway that holds it
        self.counters = dict.fromkeys(names, 0)
        self.registry = CollectorRegistry()
        self._requests = Counter("regret_gateway_requests", "Requests by tier and what the hook did with them.",
                                 ["tier", "outcome"], registry=self.registry)  # fmt: skip
        self._events = Counter("regret_gateway_routing_events", "What happened inside routed requests (not exclusive).",
                               ["tier", "event"], registry=self.registry)  # fmt: skip
        self._chosen = Counter("regret_gateway_chosen_model", "Routed requests by tier, chosen model and how it was chosen.",
                               ["tier", "model", "mode"], registry=self.registry)  # fmt: skip
        self._spend = Counter("regret_gateway_spend_usd", "What routed answers cost (USD), as LiteLLM priced them.",
                              ["team", "tier", "model"], registry=self.registry)  # fmt: skip
        self.hook_seconds = Histogram("regret_gateway_hook_seconds", "Time the hook adds to a routed request.",
                                      buckets=SECONDS, registry=self.registry)  # fmt: skip
        self.embedding_seconds = Histogram("regret_gateway_embedding_seconds", "Time spent embedding a routed request.",
                                           buckets=SECONDS, registry=self.registry)  # fmt: skip
        self.registry.register(_Snapshot(gateway))

    def count(self, name: str, tier: str | None = None) -> None:
        """One more ``name`` (one of the gateway's counters) for a request of ``tier``."""
        self.counters[name] += 1
        if name in OUTCOMES:
            self._requests.labels(tier=tier or "", outcome=name).inc()
        else:
            self._events.labels(tier=tier or "", event=name).inc()

    def chosen(self, tier: str, model: str, mode: str) -> None:
        self._chosen.labels(tier=tier, model=model, mode=mode).inc()

    def spent(self, team: str | None, tier: str, model: str, usd: float) -> None:
        if usd > 0:
            self._spend.labels(team=team or "", tier=tier, model=model).inc(usd)

    def exposition(self) -> bytes:
        """Every metric, in Prometheus' text format."""
        return generate_latest(self.registry)


class _Snapshot(Collector):
    """The metrics read from the gateway at each scrape."""

    def __init__(self, gateway: Any) -> None:
        self._gateway = gateway

    def collect(self) -> Iterator[Metric]:
        gw = self._gateway
        stats, steerer = gw.stats(), gw.steerer
        lams = {team: steerer.lam(team, position) for team, position in steerer.positions.items()}
        budgets = {
            team: (spec.budget.usd, spec.budget.per) for team, spec in gw.settings.teams.items() if spec.budget is not None
        }
        writer = asdict(stats.writer)
        yield GaugeMetricFamily("regret_gateway_writer_queue_depth", "Decisions queued for the store now.", writer["queue_depth"])
        yield _by_result("regret_gateway_writer_records", "Decision records by what became of them.", writer, _WRITER)
        yield GaugeMetricFamily(
            "regret_gateway_database_down", "1 while the store is unreachable.", float(writer["database_down"])
        )
        if stats.judge is not None:
            judge = asdict(stats.judge)
            yield GaugeMetricFamily("regret_gateway_judge_queue_depth", "Answers waiting for the judge.", judge["queue_depth"])
            yield _by_result("regret_gateway_judge_answers", "Answers offered to the judge, by result.", judge, _JUDGE)
            yield CounterMetricFamily("regret_gateway_judge_spend_usd", "What the judge's calls cost (USD).", judge["spend_usd"])
        yield GaugeMetricFamily("regret_gateway_sessions", "Conversations this worker keeps a model for.", stats.sessions)
        lam = GaugeMetricFamily("regret_gateway_team_lambda", "The lambda a budgeted team is routed at now.", labels=["team"])
        for team, value in sorted(lams.items()):
            lam.add_metric([team], value)
        yield lam
        budget = GaugeMetricFamily("regret_gateway_team_budget_usd", "A team's budget (USD) per period.", labels=["team", "per"])
        for team, (usd, per) in sorted(budgets.items()):
            budget.add_metric([team, per], usd)
        yield budget
        info = GaugeMetricFamily("regret_gateway_router_info", "The router version this worker serves (1).", labels=["version"])
        info.add_metric([stats.router_version or "none"], 1.0)
        yield info


def _by_result(name: str, documentation: str, counts: dict, results: tuple[str, ...]) -> CounterMetricFamily:
    """One counter family labelled ``result``: each of ``results`` with its value in ``counts``."""
    family = CounterMetricFamily(name, documentation, labels=["result"])
    for result in results:
        family.add_metric([result], counts[result])
    return family
