"""The teams: the gateway section of the demo's proxy config, clients through the OpenAI SDK (HTTP), and the
in-process replay through the hook's own handlers."""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from regret_gateway.bench.demo.world import JUDGE_MODEL, READS, DemoConfig, World, judge_models
from regret_gateway.evaluation.traffic import model_limits


def gateway_section(world: World, cfg: DemoConfig, work: Path, keys: dict[str, str]) -> dict:
    from regret_gateway.encoders.embedder import default_cache_dir

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
            "kind": cfg.encoder,
            "device": cfg.device,
            "paper_template": cfg.paper_template,
            **({"context": cfg.context} if cfg.context is not None else {}),
            "reads": READS,
            "onnx_cache": str(default_cache_dir("encoders")),  # the machine's: one export for every demo run and `serve`
        },
        # chat traffic: the cheapest model's window is small, the second cheapest takes no tools (evaluation/traffic.py)
        **(
            {"model_info": {m: _limits(info) for m, info in model_limits(world.bench).items() if _limits(info)}}
            if world.chat is not None
            else {}
        ),  # fmt: skip
        "store": {"url": f"sqlite:///{work}/gateway.db", "spill_dir": str(work / "spill"), "flush_interval_s": 0.2},
        "artifacts_dir": str(work / "artifacts"),
        "reload_interval_s": 0.5,
        "route_timeout_s": 5.0,  # CPU embedding under the demo's own load; production default is 2 s
        **(
            {
                "judge": {
                    "model": JUDGE_MODEL if cfg.judge_panel == 1 else list(judge_models(cfg.judge_panel)),
                    "teams": ["*"],
                    "sample": cfg.judge_sample,
                    "repeat": cfg.judge_repeat,
                    "max_chars": 10**7,
                    "concurrency": 8,
                    "queue_size": 100_000,
                }
            }  # fmt: skip
            if cfg.judge_sample is not None
            else {}
        ),
    }


def _limits(info) -> dict:
    """A :class:`~regret_gateway.limits.ModelInfo`'s stated limits, as the config's ``model_info`` entry."""
    return {k: v for k, v in dataclasses.asdict(info).items() if v is not None}


class UserScores:
    """Which requests a user scores as well as the judge: a seeded share, drawn in request order."""

    def __init__(self, share: float, seed: int) -> None:
        self.share, self.rng = share, np.random.default_rng([seed, 7])

    def scores(self) -> bool:
        """Whether the next request is scored by its user."""
        return self.share > 0 and bool(self.rng.random() < self.share)


class Teams:
    """The three teams' clients: a request through the OpenAI SDK, its audit, then the recorded correctness as feedback."""

    def __init__(self, base: str, keys: dict[str, str], world: World, *, judged: bool = False, user_share: float = 0.0,
                 seed: int = 0) -> None:  # fmt: skip
        import httpx
        from openai import OpenAI

        self.keys, self.world, self.judged = keys, world, judged
        self.users = UserScores(user_share, seed)
        self.clients = {team: OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0) for team, key in keys.items()}
        self.http = httpx.Client(base_url=base, timeout=60)

    def ask_many(self, team: str, rows: np.ndarray, concurrency: int) -> list[tuple[int, str | None]]:
        """Each prompt of ``rows`` as one request; then the team's scores for them, in batches (what a team's
        scoring job posts), and the audit of its first request, which must say what the headers said."""
        from regret_gateway.gateway.routes import MAX_BATCH

        with ThreadPoolExecutor(concurrency) as pool:
            asked = list(pool.map(lambda i: self.ask(team, int(i)), rows))
        headers = {"Authorization": f"Bearer {self.keys[team]}"}
        scores = [score for *_, score in asked if score is not None]
        for start in range(0, len(scores), MAX_BATCH):
            self.http.post(
                "/regret/feedback/batch", headers=headers, json={"scores": scores[start : start + MAX_BATCH]}
            ).raise_for_status()
        t, version, rid, _ = asked[0]
        audit = self.http.get(f"/regret/decisions/{rid}", headers=headers).json()
        if (audit["chosen_model"], audit["router_version"]) != (self.world.models[t], version):
            raise RuntimeError(f"the audit of {rid} says {audit['chosen_model']} ({audit['router_version']}), its headers "
                               f"{self.world.models[t]} ({version})")  # fmt: skip
        return [(t, version) for t, version, _, _ in asked]

    def ask(self, team: str, i: int) -> tuple[int, str | None, str, dict | None]:
        """(model index chosen, router version, request id, the team's score or None) for prompt ``i``, as
        the response's headers tell them."""
        from regret_gateway.gateway.hook import CHOSEN_HEADER, REQUEST_ID_HEADER, VERSION_HEADER

        raw = self.clients[team].chat.completions.with_raw_response.create(
            model="regret-router",
            **self.world.request(i),
            extra_body={"metadata": {"tags": self.world.tags(i)}},
        )
        rid, t = raw.headers[REQUEST_ID_HEADER], self.world.models.index(raw.headers[CHOSEN_HEADER])
        score = None
        if not self.judged or self.users.scores():  # judge mode: the judge scores a sample; users a share too
            score = {
                "request_id": rid,
                "score": float(self.world.bench.quality[i, t]),
                "source": "user" if self.judged else "demo",
            }
        return t, raw.headers.get(VERSION_HEADER), rid, score


class ReplayTeams:
    """The teams without HTTP: each request goes through the hook's own pre-call and success handlers and
    the gateway's store writer, one after another in one event loop (``concurrency`` is the HTTP demo's: here
    the order of the gateway's random draws and of the logged rows is the order of the requests, so a seed
    reproduces the run); the feedback is written to the store once the round's decisions are (what
    ``POST /regret/feedback`` writes). Embeddings come from the world's own (same embedder), so volume costs
    routing and logging only."""

    def __init__(self, gateway, world: World, *, user_share: float = 0.0, seed: int = 0) -> None:
        from regret_gateway.gateway.hook import RegretRouterHook

        self.gateway, self.world, self.hook = gateway, world, RegretRouterHook(gateway)
        self.users = UserScores(user_share, seed)
        self.index = {m: t for t, m in enumerate(world.models)}

    async def _ask(self, team: str, i: int) -> tuple[int, str | None, str]:
        from types import SimpleNamespace

        bench = self.world.bench
        data = {"model": self.gateway.settings.virtual_model, **self.world.request(i), "metadata": {"tags": self.world.tags(i)}}
        key = SimpleNamespace(team_id=team, team_metadata=None, user_role=None)
        data = await self.hook.async_pre_call_hook(key, None, data, "completion")
        meta = data["metadata"]["regret_gateway"]
        t = self.index[meta["model"]]
        outcome = {"metadata": data["metadata"], "messages": data["messages"],
                   "standard_logging_object": {"response_cost": float(bench.cost[i, t])}}  # fmt: skip
        answer = SimpleNamespace(
            choices=[SimpleNamespace(message=SimpleNamespace(content=self.world.respond(meta["model"], bench.prompts[i])[0]))]
        )
        await self.hook.async_log_success_event(outcome, answer, None, None)
        return t, meta["router_version"], meta["request_id"]

    def ask_many(self, team: str, rows: np.ndarray, concurrency: int) -> list[tuple[int, str | None]]:

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
        quality = self.world.bench.quality
        if self.gateway.judge is not None:  # judge mode: the judge's scores are the feedback, and users' on a share
            with Session(self.gateway.engine) as session, session.begin():
                record_feedback(session, [FeedbackRecord(rid, float(quality[i, t]), source="user")
                                          for i, (t, _, rid) in zip(rows, answers) if self.users.scores()])  # fmt: skip
            return [(t, v) for t, v, _ in answers]
        with Session(self.gateway.engine) as session, session.begin():
            record_feedback(session, [FeedbackRecord(rid, float(quality[i, t]), source="demo")
                                      for i, (t, _, rid) in zip(rows, answers)])  # fmt: skip
        return [(t, v) for t, v, _ in answers]
