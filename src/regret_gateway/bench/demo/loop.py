"""The loop: rounds of traffic, scoring against the references on the traffic and the held-out prompts,
retrain between rounds."""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import yaml

from regret_gateway.bench.demo.budget_days import SimClock, budget_verdict, run_budget_days, write_budget_report
from regret_gateway.bench.demo.processes import InProcess, ServeProcess, retrain_process
from regret_gateway.bench.demo.report import RoundStats, plot, round_table, verdict
from regret_gateway.bench.demo.traffic import ReplayTeams, Teams, gateway_section
from regret_gateway.bench.demo.world import JUDGE_PRICE, JUDGE_TOKENS, OUTPUT_PRICE, DemoConfig, World, judge_models, prepare


def utilities(bench, rows: np.ndarray, lam: float) -> np.ndarray:
    """(len(rows), T) each prompt's true utility per model at ``lam``: quality - lam x cost (USD)."""
    return bench.quality[rows] - lam * bench.cost[rows]


def mean_utility(bench, rows: np.ndarray, lam: float, choice: np.ndarray) -> float:
    """Utility x100 of ``choice`` (one model per row) on prompts ``rows``, the mean over them."""
    return float(100 * utilities(bench, rows, lam)[np.arange(len(rows)), choice].mean())


def score(stats: RoundStats, bench, rows: np.ndarray, lam: float, picks: dict[str, np.ndarray]) -> None:
    """Utility x100, accuracy and cost on prompts ``rows`` of each named choice ``picks`` (one model per row)."""
    n = np.arange(len(rows))
    for name, a in picks.items():
        stats.utility[name] = mean_utility(bench, rows, lam, a)
        stats.accuracy[name] = float(bench.quality[rows][n, a].mean())
        stats.cost[name] = float(bench.cost[rows][n, a].mean())


def greedy_choices(world: World, artifact, tier: str, lam: float, rows: np.ndarray) -> np.ndarray | None:
    """(n,) the router's own choices for prompts ``rows`` (no exploration): the greedy choices of ``artifact``
    (the router that served the round) for ``tier``; None where it serves no router for it (the cold start)."""
    if artifact is None or artifact.router.tier(tier) is None:
        return None
    names = list(artifact.model_names)
    return np.array([world.models.index(names[k]) for k in artifact.router.choose(tier, world.X[rows], lam)])


def round_stats(world: World, rnd: int, tier: str, lam: float, rows: np.ndarray, answers: list, artifact) -> RoundStats:
    """The round's scores on the traffic it sent: ``answers`` (model index, router version) per row of ``rows``,
    what the teams got; ``gateway-greedy`` the router's own choices on the same requests (``artifact``'s; in the
    cold start, what the teams got)."""
    bench = world.bench
    served = np.array([t for t, _ in answers])
    greedy = greedy_choices(world, artifact, tier, lam, rows)
    picks = {
        "gateway": served,
        "gateway-greedy": served if greedy is None else greedy,
        "full-feedback": world.full_information.predict("full-feedback", world.X[rows], lam),
        "full-info": world.full_information.predict("full-info", world.X[rows], lam),
        "litellm-adaptive": np.array([world.adaptive[lam].choose_and_learn(bench.prompts[i], bench.quality[i]) for i in rows]),
        "best-single": np.full(len(rows), world.best_single_for(lam, rows)),
        "cheapest": np.full(len(rows), world.cheapest),
    }
    stats = RoundStats(rnd, tier, lam, ",".join(sorted({str(v) for _, v in answers})))
    score(stats, bench, rows, lam, picks)
    stats.utility["uniform"] = float(100 * utilities(bench, rows, lam).mean())
    stats.accuracy["uniform"] = float(bench.quality[rows].mean())
    stats.cost["uniform"] = float(bench.cost[rows].mean())
    return stats


def held_out_stats(world: World, artifact, lam: float, stats: RoundStats, rows: np.ndarray) -> None:
    """Score, on the prompts never sent, the greedy choices of ``artifact`` (the router that served the round;
    None before the first: no ``held-out greedy`` entry) beside the best single model, each app's best model
    (chosen on the references' prompts with every outcome known; with bare prompts the app is the task), the
    best full-information router, and the oracle (each prompt's best model: the ceiling). ``rows``: the
    never-sent prompts of the tier's team (every one, unless the teams send only their own apps')."""
    if len(rows) == 0:
        return
    picks = {
        "held-out best-single": np.full(len(rows), world.best_single_for(lam, rows)),
        "held-out per-app best": world.app_best(lam, rows),
        "held-out full-info": world.full_information.predict("full-info", world.X[rows], lam),
        "held-out oracle": np.argmax(utilities(world.bench, rows, lam), axis=1),
    }
    greedy = greedy_choices(world, artifact, stats.tier, lam, rows)
    if greedy is not None:
        picks["held-out greedy"] = greedy
    score(stats, world.bench, rows, lam, picks)


def claim_checks(
    world: World, tiers: list, before, after, rnd: int, rows_of: dict[str, tuple[np.ndarray, np.ndarray]]
) -> list[dict]:
    """Every gain a retrain published, beside its truth on the prompts never sent: per tier that now serves
    something other than its incumbent, the claimed gain (x100, its 95% interval) of the published policy
    over the incumbent; per tier whose safe default departs from its constant in some regions, the gain the
    regions claim over that constant (a one-sided bound: the interval's upper end is +inf); and the true
    difference of their greedy choices on the held-out prompts -- and on the traffic's prompts, the pool the logs were drawn from (a claim that misses both is the estimate's error on
    its own logs, not a failure to carry to new prompts). ``before``, ``after``: the artifacts that served
    before and after the retrain; ``rows_of``: per tier, the (never-sent, traffic) prompts of its team."""
    from regret_gateway.servable.policy import Candidate, CandidateKind

    out = list[dict]()
    if len(world.held_ix) == 0 or after is None:
        return out

    def truth(te, incumbent, rows: np.ndarray) -> float | None:
        new = greedy_choices(world, after, te.tier, te.lam, rows)
        old: np.ndarray | None
        if isinstance(incumbent, Candidate) and incumbent.kind == CandidateKind.CONSTANT and incumbent.model is not None:
            old = np.full(len(rows), world.models.index(incumbent.model))
        else:  # the policy the tier served before
            old = greedy_choices(world, before, te.tier, te.lam, rows)
        if new is None or old is None:
            return None
        return mean_utility(world.bench, rows, te.lam, new) - mean_utility(world.bench, rows, te.lam, old)

    for te in tiers:
        incumbent, served = te.candidates.get(te.incumbent), te.candidates.get(te.served)
        if te.served != te.incumbent and incumbent is not None:
            claim, over, lo, hi = 100 * te.gain, incumbent, 100 * te.gain_ci[0], 100 * te.gain_ci[1]
        elif served is not None and served.kind == CandidateKind.REGIONS and te.regions_adopted:
            # a safe default's regions, re-derived by the retrain, claim a gain over its constant (one-sided)
            over = Candidate(CandidateKind.CONSTANT, served.model)
            claim, lo, hi = 100 * te.regions_gain, 100 * te.regions_lower, float("inf")
        else:
            continue
        held, pool = (truth(te, over, rows) for rows in rows_of[te.tier])
        if held is None:
            continue
        out.append({"round": rnd, "tier": te.tier, "published": te.served, "incumbent": over.label,
                    "claimed": claim, "ci": [lo, hi], "held_out_truth": held, "traffic_truth": pool,
                    "holds": lo <= held <= hi})  # fmt: skip
    return out


def claims_line(claims: list[dict]) -> str:
    """How many of the published gains' intervals held their truth on the prompts never sent."""
    if not claims:
        return "published claims: none (no retrain changed what a tier serves)"
    held = sum(c["holds"] for c in claims)
    worst = min(claims, key=lambda c: c["held_out_truth"] - c["ci"][0])
    return (f"published claims: {held} of {len(claims)} intervals held their truth on the prompts never sent "
            f"({held / len(claims):.0%}); the worst: round {worst['round']} {worst['tier']} {worst['published']} over "
            f"{worst['incumbent']} claimed {worst['claimed']:+.1f} [{worst['ci'][0]:+.1f}, {worst['ci'][1]:+.1f}], "
            f"true {worst['held_out_truth']:+.1f}")  # fmt: skip


def run_demo(cfg: DemoConfig, *, echo=print) -> dict:
    """Run the closed loop; returns the per-round table and writes OUT/closed_loop.{json,png,md}."""
    from regret_gateway.gateway.app import litellm_environment

    litellm_environment()
    os.environ.setdefault("LITELLM_MASTER_KEY", "sk-demo-master-" + os.urandom(8).hex())
    from regret_gateway.bench.local import free_port
    from regret_gateway.gateway.runtime import Gateway
    from regret_gateway.store.engine import make_engine

    out, t_start = Path(cfg.out), time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="regret-demo-", dir=out))
    traffic_seq, gateway_seq, judge_seq, retrain_seq = _streams(cfg)
    world = prepare(cfg, work, echo)
    keys = {team: f"sk-{team}-{os.urandom(6).hex()}" for team, _, _ in cfg.tiers}
    up_port, proxy_port = free_port(), free_port()
    judges = judge_models(cfg.judge_panel)  # the mock upstream serves each as the judge
    settings = _write_config(cfg, world, work, keys, judges, up_port)
    judge_rng = np.random.default_rng(judge_seq)

    def respond(model: str, text: str) -> tuple[str, int, int]:  # the mock upstream, the judge model included
        return (world.judge(text, cfg.judge_noise, judge_rng), 0, JUDGE_TOKENS) if model in judges else world.respond(model, text)

    async def replay_judge(model: str, messages: list[dict], timeout_s: float) -> tuple[str, float]:
        return world.judge(messages[-1]["content"], cfg.judge_noise, judge_rng), JUDGE_TOKENS * JUDGE_PRICE

    clock = SimClock()  # real time; the budget days set it
    gateway = None if cfg.own_processes else Gateway(
        settings, encode=world.encode if cfg.replay else None, seed=int(gateway_seq.generate_state(1)[0]),
        judge_complete=replay_judge if cfg.replay else None, clock=clock)  # fmt: skip
    rng, retrain_seed = np.random.default_rng(traffic_seq), int(retrain_seq.generate_state(1)[0] % 2**31)
    rows_of = {  # per tier, the never-sent and the traffic prompts of its team
        tier: (world.team_rows(world.held_ix, k, len(cfg.tiers), cfg.team_apps),
               world.team_rows(world.traffic_ix, k, len(cfg.tiers), cfg.team_apps))
        for k, (_, tier, _) in enumerate(cfg.tiers)
    }  # fmt: skip
    table, claims, unfit = list[RoundStats](), list[dict](), 0
    with ExitStack() as stack:
        ask, served = _front(stack, cfg, world, gateway, work, settings, keys, respond, (up_port, proxy_port), echo)
        engine = make_engine(settings.store.url)
        stack.callback(engine.dispose)
        last_round_start, sent = clock(), 0
        for rnd in range(cfg.rounds):
            t_round, last_round_start = time.perf_counter(), clock()
            for team, tier, lam in cfg.tiers:
                echo(f"round {rnd}: team {team} (tier {tier}) sends {cfg.requests} requests")
                rows = rng.choice(rows_of[tier][1], size=cfg.requests, replace=True)
                answers = ask(team, rows, cfg.concurrency)
                sent, unfit = sent + len(rows), unfit + _unfit(world, rows, answers)
                artifact = served.artifact  # what routed the tier's requests (a proxy process: one read of its counters)
                table.append(round_stats(world, rnd, tier, lam, rows, answers, artifact))
                held_out_stats(world, artifact, lam, table[-1], rows_of[tier][0])
            echo(round_table(table, rnd) + f"\n(round {rnd} took {time.perf_counter() - t_round:.0f}s)")
            if rnd < cfg.rounds - 1:
                served.settle(engine, sent)
                before = served.artifact
                result = _retrain_round(cfg, work, settings, engine, retrain_seed + rnd, rnd, own_process=gateway is None,
                                        echo=echo)  # fmt: skip
                echo(f"retrain after round {rnd}: {result.status} ({result.reason}) in {result.seconds.get('total', 0):.0f}s")
                served.load(result.version)
                if result.version is not None:  # published, or kept and republished with re-derived regions
                    claims += claim_checks(world, result.tiers, before, served.artifact, rnd, rows_of)
        served.settle(engine, sent)
        if cfg.budget_days and gateway is not None:  # a replay's
            budget_days = run_budget_days(cfg, world, gateway, work / "config.yaml", clock, rng, echo)
        hook = served.stats()
    savings = demo_savings(settings, engine, last_round_start, clock(), out)
    doc = {
        "config": {k: str(v) for k, v in cfg.__dict__.items()}, "models": list(world.models),
        "rounds": [s.__dict__ for s in table], "seconds": time.perf_counter() - t_start, "work_dir": str(work),
        "hook": hook, "sent_to_a_model_that_cannot_take_it": unfit if world.chat is not None else None, "claims": claims,
    }  # fmt: skip
    if gateway is not None:
        gateway.close()
    _write_outputs(cfg, out, doc, table, savings, budget_days if cfg.budget_days else None, echo)
    return doc


def _streams(cfg: DemoConfig) -> list[np.random.SeedSequence]:
    """(traffic, gateway, judge, retrain): independent streams from the one seed. Generators seeded with the same
    number draw the same numbers, so a traffic stream and a gateway stream both seeded with ``cfg.seed`` would
    route each prompt of the cold start to a model fixed by the prompt's draw (and a retrain split would follow
    the traffic). ``routing_seed``: another draw of the loop's own randomness on the same world and traffic.
    Also seeds the global generator, which LiteLLM's adaptive router samples from (in replay the run is the
    seed's), and sets the retrains' fit threads (they run in this process)."""
    random.seed(cfg.seed)
    if cfg.threads is not None:
        import torch

        torch.set_num_threads(cfg.threads)
    streams = np.random.SeedSequence(cfg.seed).spawn(4)
    if cfg.routing_seed is not None:
        again = np.random.SeedSequence([cfg.seed, cfg.routing_seed]).spawn(4)
        streams[1], streams[3] = again[1], again[3]
    return streams


def _write_config(cfg: DemoConfig, world, work: Path, keys: dict[str, str], judges, up_port: int):
    """The run's LiteLLM config (the gateway's section, the models' prices, the mock upstream's URL) written to
    ``work``/config.yaml, and the settings read back from it."""
    from regret_gateway.bench.local import proxy_config
    from regret_gateway.config import load_settings

    prices = {m: (0.0, OUTPUT_PRICE) for m in world.models}
    if cfg.judge_sample is not None:
        prices.update({judge: (0.0, JUDGE_PRICE) for judge in judges})
    config = proxy_config(gateway_section(world, cfg, work, keys), prices, f"http://127.0.0.1:{up_port}/v1",
                          custom_auth=True, api_key="sk-mock")  # fmt: skip
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    return load_settings(work / "config.yaml")


def _front(stack: ExitStack, cfg: DemoConfig, world, gateway, work: Path, settings, keys: dict[str, str], respond,
           ports: tuple[int, int], echo):  # fmt: skip
    """(how a team sends its requests, the gateway as the demo sees it): in a replay the teams call the hook in
    this process; else the mock upstream and the proxy -- this process's app, or a `serve` process -- on local
    ports, and the teams are OpenAI-SDK clients (each entered into ``stack``)."""
    from regret_gateway.bench.local import LocalServer, mock_upstream
    from regret_gateway.gateway.server import build_app

    served: InProcess | ServeProcess | None = None
    if cfg.replay:
        ask = ReplayTeams(gateway, world, user_share=cfg.user_share, seed=cfg.seed).ask_many
    else:
        up_port, proxy_port = ports
        stack.enter_context(LocalServer(mock_upstream(respond), up_port))
        if gateway is not None:
            stack.enter_context(LocalServer(build_app(work / "config.yaml", gateway), proxy_port))
        else:
            echo(f"starting `regret-gateway serve` (its log: {work / 'serve.log'})")
            served = stack.enter_context(ServeProcess(work / "config.yaml", proxy_port, work / "serve.log",
                                                      os.environ["LITELLM_MASTER_KEY"], Path(settings.artifacts_dir)))  # fmt: skip
        teams = Teams(f"http://127.0.0.1:{proxy_port}", keys, world, judged=cfg.judge_sample is not None,
                      user_share=cfg.user_share, seed=cfg.seed)  # fmt: skip
        stack.callback(teams.http.close)
        ask = teams.ask_many
    if gateway is not None:
        echo("starting the gateway: store, encoder (distilled once a machine), router")
        gateway.start()  # load the embedder, store and router before the first request
        served = InProcess(gateway, cfg.replay)
    assert served is not None
    return ask, served


def _unfit(world, rows: np.ndarray, answers) -> int:
    """How many of ``rows``' requests went to a model that cannot take them (their window, their tools)."""
    return 0 if world.chat is None else sum(not world.chat.eligible[i, t] for i, (t, _) in zip(rows, answers))


def _retrain_round(cfg: DemoConfig, work: Path, settings, engine, seed: int, rnd: int, *, own_process: bool, echo):
    """The retrain after round ``rnd``: a `regret-gateway retrain` process where the gateway is `serve`'s, else
    in this process (its steps echoed)."""
    from regret_gateway.retrain import RetrainOptions, retrain

    if own_process:
        return retrain_process(work / "config.yaml", work / "reports" / f"round-{rnd}", seed=seed, cross_fit=cfg.cross_fit,
                               calibrate_judge=cfg.calibrate_judge, cold_start_rows=cfg.cold_start_rows,
                               threads=cfg.threads, log=work / "retrain.log")  # fmt: skip
    options = RetrainOptions(seed=seed, out=work / "reports", n_boot=200, cross_fit=cfg.cross_fit,
                             calibrate_judge=cfg.calibrate_judge, cold_start_rows=cfg.cold_start_rows)  # fmt: skip
    return retrain(settings, engine, options, progress=lambda line: echo(f"  retrain: {line}"))


def _write_outputs(cfg: DemoConfig, out: Path, doc: dict, table: list, savings, budget_days, echo) -> None:
    """OUT/closed_loop.{json,md,png} and the verdict (the loop's, the claims', the chat traffic's -- all read
    from ``doc`` -- and what routing saved), each part echoed as the run says it; the budget days' report
    where they ran."""
    (out / "closed_loop.json").write_text(json.dumps(doc, indent=2, default=float))
    (out / "closed_loop.md").write_text(round_table(table, None))
    plot(table, out / "closed_loop.png")
    summary = [verdict(table), claims_line(doc["claims"])]
    if (unfit := doc["sent_to_a_model_that_cannot_take_it"]) is not None:
        summary.append(chat_line(doc["hook"], unfit))
    summary.append(f"what routing saved on the requests from the last round (round {cfg.rounds - 1}) on, the router's "
                   "exploration included, against sending each of them to one model (`regret-gateway report` on the logs):")  # fmt: skip
    summary += ["  " + team.headline() for team in savings.teams] + ["  " + line for line in savings.left_out_lines()]
    (out / "verdict.txt").write_text("\n".join(summary) + "\n")
    for part in summary:  # each as the run said it before there was a file (the verdict is one block of lines)
        echo(part)
    if budget_days is not None:
        write_budget_report(budget_days, out)
        echo(budget_verdict(budget_days) + f"\nwrote {out / 'budget.json'}, {out / 'budget.md'}, {out / 'budget.png'}")
    echo(
        f"wrote {out / 'verdict.txt'}, {out / 'closed_loop.json'}, {out / 'closed_loop.md'}, {out / 'closed_loop.png'}, "
        f"{out / 'savings.html'} in {doc['seconds']:.0f}s"
    )


def demo_savings(settings, engine, since, now, out: Path):
    """The savings report of the demo's requests from ``since`` (the last round's start) on, and its page,
    written to OUT/savings.html."""
    from datetime import timedelta

    from sqlalchemy.orm import Session

    from regret_gateway.savings.html import report_html
    from regret_gateway.savings.report import savings_report

    with Session(engine) as session:
        report = savings_report(settings, session, since, now + timedelta(seconds=1))
    (out / "savings.html").write_text(report_html(report, settings))
    return report


def chat_line(hook: dict, unfit: int) -> str:
    """What the gateway did with the chat traffic's conversations and limits, in words."""
    return (
        f"conversations: {hook['session_kept']} later turns kept on their conversation's model, {hook['session_rerouted']} "
        f"routed afresh; {hook['restricted']} requests routed among the models that can take them, {unfit} sent to a "
        f"model that cannot, {hook['ineligible']} refused (no model could take them)"
    )
