"""`python -m regret_gateway` is the `regret-gateway` command."""

from regret_gateway.cli import app

app(prog_name="regret-gateway")
