"""Where retrain's fits run: one interface, :class:`LocalExecutor` (in this process, one after another) by
default, :class:`RayExecutor` (each fit a Ray task, on a local Ray or the cluster ``RAY_ADDRESS`` names) with
the ``ray`` extra. Cross-fitting hands its folds' fits to the executor (retrain/fits.py); a fit's result does not
depend on where it ran, so the same seed publishes the same router on either (a test checks it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

EXECUTORS = ("local", "ray")


class Executor(Protocol):
    """Runs ``fn(*args)`` for each args tuple and returns the results in order; ``on_start(i)`` as call i
    starts (locally) or is handed out (Ray)."""

    name: str

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple], on_start: Callable[[int], None] | None = None) -> list[Any]: ...


class LocalExecutor:
    """In this process, one call after another (on 2 cores torch's threads already keep both busy)."""

    name = "local"

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple], on_start: Callable[[int], None] | None = None) -> list[Any]:
        done = []
        for i, args in enumerate(calls):
            if on_start is not None:
                on_start(i)
            done.append(fn(*args))
        return done


class RayExecutor:
    """Each call a Ray task of ``cpus`` CPUs (default: the task's torch threads, 1). Ray is started here for
    the run (on this machine) unless it is running already; with ``RAY_ADDRESS`` set (Ray's own variable,
    e.g. ``ray://head:10001``), the tasks run on that cluster, whose workers need this package installed."""

    name = "ray"

    def __init__(self, cpus: float = 1.0):
        try:
            import ray
        except ImportError as exc:
            raise ImportError("--executor ray needs Ray: pip install 'regret-gateway[ray]'") from exc
        self._ray, self.cpus = ray, cpus

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple], on_start: Callable[[int], None] | None = None) -> list[Any]:
        ray = self._ray
        if not ray.is_initialized():
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
        task = ray.remote(num_cpus=self.cpus, max_retries=1)(fn)
        refs = []
        for i, args in enumerate(calls):
            if on_start is not None:
                on_start(i)
            refs.append(task.remote(*args))
        return ray.get(refs)


def executor_named(name: str) -> Executor:
    """The executor ``retrain --executor NAME`` asks for (one of :data:`EXECUTORS`)."""
    if name == "local":
        return LocalExecutor()
    if name == "ray":
        return RayExecutor()
    raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {name!r}")
