"""The embedding step alone, outside the proxy: one request's encode (tokenise, forward pass, pooling) with
each encoder the machine has -- the static encoder, torch on CPU, ONNX Runtime on CPU and, where CUDA is
present, torch on the GPU -- for the gateway bench's short (~20-token), long (~190-token) and xlong
(~1,000-token) prompts, p50/p99 over fresh prompts,
the CPU time (every thread) per request, and a batch of 64 (what the hook's batcher sends under load). Side
by side in one run; ``--rounds R`` measures every encoder R times in turn (the machine's drift shows
between rounds, not between encoders). ONNX Runtime runs the fused graph (the default) and the plain one
(``embedder.fuse: false``), and torch traced (the default) and eager (``embedder.trace: false``). ``--layers
2,3`` adds ONNX Runtime encoders of the model's first N layers (``embedder.layers``). ``--busy`` adds a column:
one request's encode while another Python thread runs without pause -- what the proxy's event loop does
under load -- which each encoder waits on whenever it gives up the GIL and takes it back.

    python experiments/encoder_latency.py [--calls 200] [--rounds 1] [--layers 2,3] [--busy]
        [--encoders 'static on cpu,onnx on cpu']
"""

from __future__ import annotations

import argparse
import itertools
import threading
import time

import numpy as np

from regret_gateway.bench.hook_latency import _long_prompts, _prompts, _xlong_prompts
from regret_gateway.encoders.embedder import Embedder, default_cache_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1, help="times every encoder is measured, in turn")
    ap.add_argument("--layers", default="", help="shallower ONNX encoders to add, e.g. 2,3")
    ap.add_argument("--busy", action="store_true", help="also time one request beside a busy Python thread")
    ap.add_argument("--encoders", default="", help="only these CPU encoders, e.g. 'static on cpu,onnx on cpu'")
    args = ap.parse_args()
    import torch

    encoders = {
        "static on cpu": Embedder(device="cpu", kind="static", progress=False),
        "torch on cpu": Embedder(device="cpu", kind="transformer", backend="torch", progress=False),
        "torch on cpu, eager": Embedder(device="cpu", kind="transformer", backend="torch", trace=False, progress=False),
        "onnx on cpu": Embedder(
            device="cpu", kind="transformer", backend="onnx", onnx_cache=default_cache_dir("onnx"), progress=False
        ),
        "onnx on cpu, plain graph": Embedder(
            device="cpu", kind="transformer", backend="onnx", fuse=False, onnx_cache=default_cache_dir("onnx"), progress=False
        ),
    }
    for n in (int(x) for x in args.layers.split(",") if x):
        encoders[f"onnx on cpu, {n} layers"] = Embedder(
            device="cpu", kind="transformer", backend="onnx", layers=n, onnx_cache=default_cache_dir("onnx"), progress=False
        )
    if args.encoders:
        encoders = {k: v for k, v in encoders.items() if k in args.encoders.split(",")}
    if torch.cuda.is_available():
        encoders["torch on cuda"] = Embedder(device="cuda", kind="transformer", backend="torch", progress=False)
        encoders["torch on cuda, eager"] = Embedder(
            device="cuda", kind="transformer", backend="torch", trace=False, progress=False
        )
    print(f"torch threads {torch.get_num_threads()}; cuda: {torch.cuda.get_device_name() if torch.cuda.is_available() else '-'}")
    busy_head = (" beside a busy thread p50 ms |", "---:|") if args.busy else ("", "")
    print(
        "| round | encoder | prompts | one request p50 ms | p99 ms | CPU ms/request | batch of 64, ms | prompts/s in batches of 64 |"
        + busy_head[0]
    )
    print("|---:|---|---|---:|---:|---:|---:|---:|" + busy_head[1])
    for r, (name, encoder), (length, make) in itertools.product(
        range(1, args.rounds + 1), encoders.items(), (("short", _prompts), ("long", _long_prompts), ("xlong", _xlong_prompts))
    ):
        texts = make(args.calls + 64 * 6, 7 + r)
        for t in texts[:20]:  # warm-up (CUDA kernels, ONNX Runtime's arena)
            encoder.encode([t])
        times, cpu = [], time.process_time()
        for t in texts[20 : 20 + args.calls]:
            t0 = time.perf_counter()
            encoder.encode([t])
            times.append(time.perf_counter() - t0)
        cpu_ms = 1000 * (time.process_time() - cpu) / args.calls
        batches = []
        for k in range(5):
            chunk = texts[args.calls + 64 * k : args.calls + 64 * (k + 1)]
            t0 = time.perf_counter()
            encoder.encode(chunk)
            batches.append(time.perf_counter() - t0)
        ms = 1000 * np.array(times)
        batch_ms = 1000 * float(np.median(batches))
        busy = f" {_beside_busy(encoder, texts[20:40]):.2f} |" if args.busy else ""
        print(
            f"| {r} | {name} | {length} | {np.percentile(ms, 50):.2f} | {np.percentile(ms, 99):.2f} | {cpu_ms:.2f} | {batch_ms:.1f} | "
            f"{64 / batch_ms * 1000:,.0f} |{busy}"
        )


def _beside_busy(encoder: Embedder, texts: list[str]) -> float:
    """p50 ms of one request's encode while another thread runs Python without pause (holding the GIL but
    at the interpreter's switch interval)."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(100))

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        times = []
        for t in texts:
            t0 = time.perf_counter()
            encoder.encode([t])
            times.append(time.perf_counter() - t0)
    finally:
        stop.set()
        spinner.join()
    return float(np.percentile(1000 * np.array(times), 50))


if __name__ == "__main__":
    main()
