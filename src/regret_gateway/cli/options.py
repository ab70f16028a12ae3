"""The command line's shared pieces: the Typer apps, the common options, one-line failures and the parsers of
comma-separated values and durations."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer


def _app(help: str) -> typer.Typer:
    """A command group. Help in Markdown: each paragraph of a docstring wraps to the terminal (rich's default
    markup keeps the docstring's own line breaks, ragged at 80 columns) and brackets print as written (rich
    markup swallows text such as "[default: 5, or 2 past ...]")."""
    return typer.Typer(help=help, no_args_is_help=True, rich_markup_mode="markdown")


app = _app("regret-gateway: causal regret-minimising LLM routing for the LiteLLM proxy.")
bench_app = _app("Benchmarks: offline reproduction of the paper, store throughput.")
app.add_typer(bench_app, name="bench")
db_app = _app("The SQL store: migrations, status, export of the training data.")
app.add_typer(db_app, name="db")
feedback_app = _app("Quality scores for routed requests.")
app.add_typer(feedback_app, name="feedback")

STORE_UNREACHABLE = 3  # exit code of retrain when the store cannot be reached

CONFIG_OPTION = typer.Option(
    None, "--config", "-c", help="Settings YAML, or the LiteLLM config.yaml with a `regret_gateway:` section."
)
URL_OPTION = typer.Option(
    None, "--url", help="Database URL (default: from settings / REGRET_GATEWAY_STORE_URL, else sqlite:///regret-gateway.db)."
)
DEVICE_OPTION = typer.Option("auto", "--device", help="Embedding device: auto | cpu | cuda.")


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2) from None


def _require_extra(command: str, extra: str, modules: tuple[str, ...]) -> None:
    """Exit 2 with one line naming the extra to install when ``command`` needs modules this install lacks."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        _fail(ImportError(f"`{command}` needs the `{extra}` extra ({', '.join(missing)} missing): "
                          f"pip install 'regret-gateway[{extra}]'"))  # fmt: skip


def _store_url(config: Optional[Path], url: Optional[str]) -> str:
    from regret_gateway.config import load_settings

    try:
        return load_settings(config, store_url=url).store.url
    except (ValueError, FileNotFoundError) as exc:
        _fail(exc)
        raise  # unreachable


def _utc(ts: Optional[datetime]) -> Optional[datetime]:
    return None if ts is None or ts.tzinfo is not None else ts.replace(tzinfo=timezone.utc)


def _floats(text: str, what: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise typer.BadParameter(f"{what} is empty")
    return values


def _counts(text: str, what: str, minimum: int = 1) -> tuple[int, ...]:
    """An optional comma-separated list of whole numbers >= ``minimum`` (``""``: none)."""
    values = _floats(text, what) if text else ()
    if any(v < minimum or v != int(v) for v in values):
        raise typer.BadParameter(f"{what} must be whole numbers >= {minimum}, got {text!r}")
    return tuple(int(v) for v in values)


def _clip(text: str) -> tuple[float, float] | None:
    if text.lower() == "none":
        return None
    values = _floats(text, "--clip")
    if len(values) != 2:
        raise typer.BadParameter(f"--clip takes two percentiles 'lo,hi' (or 'none'), got {text!r}")
    return values[0], values[1]


def _duration(text: Optional[str], what: str) -> Optional[float]:
    """'90s', '30m', '6h', '7d' -> seconds."""
    if text is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        value = float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
    except (ValueError, IndexError):
        raise typer.BadParameter(f"{what} must look like 90s, 30m, 6h or 7d, got {text!r}") from None
    if value <= 0:
        raise typer.BadParameter(f"{what} must be > 0")
    return value


def _require_store(url: str, config: Optional[Path], command: str) -> None:
    """Exit 2 with one line, before anything is written, where ``command`` would read a store that is not
    there (an SQLite file that does not exist: connecting would create an empty one) or not migrated to
    this version's schema. An unreachable server is left to the command (retrain --every waits for it)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from regret_gateway.store.migrate import status

    parsed = make_url(url)
    how = f"--config {config}" if config is not None else f"--url {parsed.render_as_string(hide_password=True)}"
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not Path(parsed.database).is_file():
            _fail(ValueError(f"`{command}`: no store at {parsed.database} (nothing has been logged there): start the "
                             f"gateway (`regret-gateway serve`) or create it with `regret-gateway db upgrade {how}`"
                             + ("" if config is not None else "; or name your deployment's config with --config")))  # fmt: skip
    try:
        state = status(url)
    except SQLAlchemyError:
        return
    if not state["up_to_date"]:
        _fail(ValueError(f"`{command}`: the store at {state['url']} is at schema revision {state['current'] or 'none'}, "
                         f"this version reads {state['head']}: run `regret-gateway db upgrade {how}`"))  # fmt: skip
