"""The gateway as the demo sees it: in the demo's own process (:class:`InProcess`: the replay, or the HTTP
demo's proxy in a thread), or as a platform runs the product (``demo --http --own-processes``): the proxy
is ``regret-gateway serve`` in a process of its own (:class:`ServeProcess`), each retrain is
``regret-gateway retrain`` in another (:func:`retrain_process`), and the demo sees them only as a platform
does -- through HTTP (``/regret/stats`` with the master key), the store and the artifacts folder. Both
answer ``artifact`` (the router serving now), ``settle`` (the round's rows are in the store), ``load``
(a retrain's version serves) and ``stats`` (the gateway's counters)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from regret_gateway.causal.ope import PolicyValue
from regret_gateway.retrain.gate import TierEvaluation
from regret_gateway.retrain.options import RetrainResult, RetrainStatus
from regret_gateway.servable.policy import Candidate

SETTLE_TIMEOUT_S = 300.0  # a round's decisions and answers written by the proxy's store writer
RELOAD_TIMEOUT_S = 120.0  # the proxy's reload timer swaps a published version in


class InProcess:
    """The demo's own :class:`~regret_gateway.gateway.runtime.Gateway`; ``replay``: no proxy, no reload
    timer running (the demo refreshes the router itself)."""

    def __init__(self, gateway, replay: bool) -> None:
        self.gateway, self.replay = gateway, replay

    @property
    def artifact(self):
        return self.gateway.router.artifact

    def settle(self, engine, sent: int) -> None:
        """Until the judge has settled what it sampled and the writer has written every queued row."""
        wait_for_judge(self.gateway)
        self.gateway.writer.drain(timeout=120)

    def load(self, version: str | None) -> None:
        """Serve ``version`` (None: nothing was published) now: what the reload timer would do."""
        if not self.replay:
            time.sleep(1.0)  # > reload_interval_s: the proxy's reload timer swaps the new version in
        if version is not None and getattr(self.gateway.router.artifact, "version", None) != version:
            self.gateway.router.refresh()

    def stats(self) -> dict:
        return self.gateway.stats().to_dict()


def wait_for_judge(gateway, timeout: float = 600.0) -> None:
    """Until every answer offered to the judge is settled (scored, failed, timed out or dropped): the
    proxy's judge works on the proxy's event loop, after the answers went back to the teams."""
    from regret_gateway.judge.sampled import all_settled

    if gateway.judge is None:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all_settled(gateway.judge.counters):
            return
        time.sleep(0.1)


class ServeProcess:
    """``with ServeProcess(config, port, log, master_key) as proxy: ...`` -- ``regret-gateway serve`` on
    127.0.0.1:``port``, its output in ``log``; stopped with SIGTERM (its writer flushes first) on exit."""

    def __init__(self, config: Path, port: int, log: Path, master_key: str, artifacts_dir: Path) -> None:
        self.config, self.port, self.log, self.master_key = config, port, log, master_key
        self.artifacts_dir = artifacts_dir
        self.proc: subprocess.Popen | None = None
        self._artifact = None

    def __enter__(self) -> "ServeProcess":
        from regret_gateway.bench.local import serve_env, serve_process, wait_ready

        self._out = self.log.open("w")
        self.proc = serve_process(self.config, self.port, serve_env(self.master_key), output=self._out)
        try:
            wait_ready(self.port, self.proc)
        except RuntimeError as exc:
            self.__exit__()
            raise RuntimeError(f"{exc} (its log: {self.log})") from None
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()

    def stats(self) -> dict:
        """The proxy's counters (``GET /regret/stats``, the master key's)."""
        import httpx

        assert self.proc is not None, "not started"
        if self.proc.poll() is not None:
            raise RuntimeError(f"the proxy exited with {self.proc.returncode} (its log: {self.log})")
        answer = httpx.get(f"http://127.0.0.1:{self.port}/regret/stats", timeout=30,
                           headers={"Authorization": f"Bearer {self.master_key}"})  # fmt: skip
        answer.raise_for_status()
        return answer.json()

    @property
    def artifact(self):
        """The router the proxy serves now (its version from its counters, loaded from the artifacts
        folder once a version); None in the cold start."""
        from regret_gateway.artifacts import load_artifact, version_folder

        version = self.stats()["router_version"]
        if version is None:
            return None
        if getattr(self._artifact, "version", None) != version:
            self._artifact = load_artifact(version_folder(self.artifacts_dir, version))
        return self._artifact

    def settle(self, engine, sent: int) -> None:
        """Return once the proxy has answered the ``sent`` requests and the store holds a decision and an
        outcome for each it logged (the proxy writes them in batches, after the answers went back; a request
        no model could take, or that went unlogged, has none), and its judge has settled every answer it sampled."""
        from regret_gateway.judge.sampled import all_settled
        from regret_gateway.store.schema import Decision, Outcome

        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            stats = self.stats()
            with Session(engine) as session:
                decisions = session.scalar(select(func.count()).select_from(Decision)) or 0
                outcomes = session.scalar(select(func.count()).select_from(Outcome)) or 0
            answered = stats["routed"] + stats["ineligible"] + stats["forbidden"] >= sent
            logged = stats["routed"] - stats["unlogged"]
            judge = {k.removeprefix("judge_"): v for k, v in stats.items() if k.startswith("judge_")}
            judged = not judge or all_settled(judge)  # judge_* only where a judge is configured
            if answered and decisions >= logged and outcomes >= logged and judged:
                return
            time.sleep(0.2)
        raise RuntimeError(f"the proxy's store writer did not write {sent} requests in {SETTLE_TIMEOUT_S:g}s (log: {self.log})")

    def load(self, version: str | None) -> None:
        """Until the proxy serves ``version`` (None: nothing was published): its reload timer loads it while
        no request arrives."""
        if version is None:
            return
        deadline = time.monotonic() + RELOAD_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.stats()["router_version"] == version:
                return
            time.sleep(0.2)
        raise RuntimeError(f"the proxy did not load {version} in {RELOAD_TIMEOUT_S:g}s (log: {self.log})")


def retrain_process(config: Path, out: Path, *, seed: int, cross_fit: bool, calibrate_judge: bool, cold_start_rows: int,
                    threads: int | None, log: Path) -> RetrainResult:  # fmt: skip
    """``regret-gateway retrain`` in a process of its own, its report (written to ``out``) read back (with the
    process's own time where the report has none); its output appended to ``log``. RuntimeError where it fails (an exit code other than published, kept, refused)."""
    args = [sys.executable, "-m", "regret_gateway", "retrain", "--config", str(config), "--out", str(out),
            "--seed", str(seed), "--cold-start-rows", str(cold_start_rows),
            "--cross-fit" if cross_fit else "--no-cross-fit",
            "--judge-calibration" if calibrate_judge else "--no-judge-calibration",
            *(["--threads", str(threads)] if threads is not None else [])]  # fmt: skip
    start = time.perf_counter()
    with log.open("a") as output:
        code = subprocess.run(args, stdout=output, stderr=subprocess.STDOUT).returncode
    if code not in {status.exit_code for status in RetrainStatus}:
        raise RuntimeError(f"retrain exited with {code} (its output: {log})")
    report = max(out.glob("*.json"), key=lambda p: p.stat().st_mtime)
    result = read_result(json.loads(report.read_text()))
    result.seconds.setdefault("total", time.perf_counter() - start)  # a refusal's report has no timings
    return result


def read_result(doc: dict) -> RetrainResult:
    """A retrain's report (its JSON) as the result it was written from."""
    tiers = [
        TierEvaluation(**{
            **t,
            "values": {k: PolicyValue(**{**v, "dr_ci": tuple(v["dr_ci"]), "snips_ci": tuple(v["snips_ci"])})
                       for k, v in t["values"].items()},
            "gain_ci": tuple(t["gain_ci"]),
            "candidates": {k: Candidate(**c) for k, c in t["candidates"].items()},
            "contenders": tuple(t["contenders"]),
        })
        for t in doc["tiers"]
    ]  # fmt: skip
    return RetrainResult(**{**doc, "status": RetrainStatus(doc["status"]), "tiers": tiers})
