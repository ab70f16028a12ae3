"""The demo as a platform runs the product: the proxy is ``regret-gateway serve`` and each retrain
``regret-gateway retrain``, in processes of their own (``demo --http --own-processes``)."""

import json

import pytest
from typer.testing import CliRunner

from regret_gateway.bench.demo import DemoConfig, run_demo
from regret_gateway.bench.demo.processes import read_result
from regret_gateway.causal.ope import PolicyValue
from regret_gateway.cli import app
from regret_gateway.retrain.gate import TierEvaluation
from regret_gateway.retrain.options import RetrainResult, RetrainStatus
from regret_gateway.servable.policy import Candidate


def test_a_retrain_report_reads_back_as_the_result_it_was_written_from():
    value = PolicyValue(dr=0.5, dr_ci=(0.4, 0.6), snips=0.5, snips_ci=(0.41, 0.59), quality=0.7, cost=1e-3, ess=80.0,
                        match_rate=0.3, n=400)  # fmt: skip
    tier = TierEvaluation(
        tier="standard", lam=200.0, served="rm-interval", incumbent="constant:a", reason="a confident gain",
        values={"rm-interval": value, "constant:a": value}, gain=0.02, gain_ci=(0.01, 0.03),
        traffic_changing_model=0.4, model_mix={"a": 0.6, "b": 0.4}, regions_adopted=1, regions=4,
        candidates={"rm-interval": Candidate("rm-interval"), "constant:a": Candidate("constant", "a", "v1")},
        contenders=("b",),
    )  # fmt: skip
    result = RetrainResult(RetrainStatus.PUBLISHED, "published", version="v2", active_before="v1", data={"rows": 400},
                           tiers=[tier], seconds={"total": 3.0})  # fmt: skip
    assert read_result(json.loads(json.dumps(result.to_dict(), default=float))) == result


def test_own_processes_need_http():
    result = CliRunner().invoke(app, ["demo", "--replay", "--own-processes"])
    assert result.exit_code == 2 and "--own-processes needs --http" in result.output


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_demo_runs_its_proxy_and_retrains_in_processes_of_their_own(tmp_path):
    """Every request through ``regret-gateway serve``; its decisions settled in the store before
    ``regret-gateway retrain`` reads them; the router that retrain published is loaded by the idle proxy's
    reload timer (no request arrives while the demo waits for it) and routes the next round."""
    lines: list[str] = []
    cfg = DemoConfig(world_size=500, rounds=2, requests=70, out=tmp_path, device="cpu", cross_fit=False, own_processes=True)
    doc = run_demo(cfg, echo=lines.append)
    published = [line for line in lines if line.startswith("retrain after round 0: published")]
    assert published, "\n".join(lines)
    work = next(tmp_path.glob("regret-demo-*"))
    report = json.loads(next((work / "reports" / "round-0").glob("*.json")).read_text())
    versions = {r["tier"]: r["router_version"] for r in doc["rounds"] if r["round"] == 1}
    assert set(versions.values()) == {report["version"]}  # the next round routed by what retrain published
    hook = doc["hook"]
    assert hook["routed"] == 2 * 3 * 70 and hook["router_reloads"] >= 1 and hook["writer_dropped"] == 0
    assert "published" in (work / "retrain.log").read_text()


def test_a_safe_defaults_regions_are_checked_as_a_claim_over_its_constant():
    """A retrain that re-derives a tier's safe default with regions departing claims a gain over its constant
    (one-sided): the demo checks it against the truth of the same comparison on the prompts never sent."""
    from types import SimpleNamespace

    import numpy as np

    from regret_gateway.bench.demo.loop import claim_checks

    n = 40
    quality = np.zeros((n, 2))
    quality[:20, 1] = 1.0  # model b is better on the first half of the prompts, where the regions depart to it
    world = SimpleNamespace(held_ix=np.arange(n), models=("a", "b"), X=np.zeros((n, 1)),
                            bench=SimpleNamespace(quality=quality, cost=np.zeros((n, 2))))  # fmt: skip
    departs = SimpleNamespace(tier=lambda tier: object(), choose=lambda tier, X, lam: (np.arange(len(X)) < 20).astype(int))
    after = SimpleNamespace(model_names=("a", "b"), router=departs)

    def tier(lower: float) -> TierEvaluation:
        return TierEvaluation(tier="standard", lam=0.0, served="regions:a", incumbent="regions:a", reason="", values={},
                              gain=0.0, gain_ci=(0.0, 0.0), traffic_changing_model=0.5, model_mix={}, regions_adopted=1,
                              regions=2, candidates={"regions:a": Candidate("regions", "a")}, regions_gain=0.5,
                              regions_lower=lower)  # fmt: skip

    rows = {"standard": (np.arange(n), np.arange(n))}
    (claim,) = claim_checks(world, [tier(0.3)], None, after, 0, rows)
    assert (claim["published"], claim["incumbent"], claim["claimed"]) == ("regions:a", "constant:a", 50.0)
    assert claim["ci"] == [30.0, float("inf")] and claim["held_out_truth"] == 50.0 and claim["holds"]
    (missed,) = claim_checks(world, [tier(0.6)], None, after, 0, rows)
    assert not missed["holds"]  # claimed at least +60, truth +50
