"""The ``regret-gateway`` command line. Each command parses, calls one library function and prints.

One module per command group (``serve``: serve, status, export-encoder; ``training``: retrain, feedback
import, import-logs; ``demo``: demo, world; ``db``; ``bench`` and ``bench_offline``); ``options`` holds the
Typer apps, the shared options and parsers. Importing this package imports no torch: the core install
(no extras) runs ``serve``, ``status`` and every ``--help``."""

from __future__ import annotations

from regret_gateway.cli import bench, bench_offline, db, demo, serve, training  # noqa: F401  (registers the commands)
from regret_gateway.cli.options import app

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover
    app()
