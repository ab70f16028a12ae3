"""A benchmark's step in a fresh process, so that its peak memory is its own (``bench retrain``, ``bench
report``)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def peak_mb() -> float | None:
    """This process's peak resident memory in MB: the kernel's high-water mark of its own address space
    (``VmHWM``; ``ru_maxrss`` keeps the forking parent's across exec, so a child would report its parent's);
    ``ru_maxrss`` where there is no ``/proc``, None where neither is there."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # not on this system
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _child(fn: Callable[..., Any], args: tuple, results) -> None:
    value = fn(*args)
    results.put((value, peak_mb()))


def in_own_process(fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> tuple[Any, float | None]:
    """``fn(*args)`` (a module-level function, picklable arguments) in a fresh spawned process: its return
    value and that process's peak resident memory in MB."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    child = ctx.Process(target=_child, args=(fn, args, results))
    child.start()
    try:
        return results.get(timeout=timeout)
    finally:
        child.join()
