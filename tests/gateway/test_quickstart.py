"""The README's "try it" block, run as a newcomer pastes it: in a bash with nothing but what the README says
(the venv `make` made, the exports it lists), `serve --mock-upstream` on the example config (no provider
keys), the example client (one answer, one stream), a score with the example feedback script, `status`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts the LiteLLM proxy in a process of its own

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- quick-start: tests/gateway/test_quickstart.py runs this block as written -->"
MODELS = ("gpt-4o-mini", "claude-haiku", "gpt-4o")  # examples/config.yaml's model_list


def quick_start_block() -> str:
    """The bash block that follows the README's quick-start marker, exactly as written."""
    readme = (ROOT / "README.md").read_text()
    assert MARKER in readme, "the README's quick start lost its marker"
    block = re.search(r"```bash\n(.*?)```", readme[readme.index(MARKER) :], re.DOTALL)
    assert block is not None
    return block.group(1)


def test_the_readmes_quick_start_runs_as_written(tmp_path):
    """A checkout's layout (the venv `make` made, examples/), a shell that has only a plain PATH and HOME."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    out = subprocess.run(["bash", "-c", quick_start_block()], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    shown = out.stdout + out.stderr[-3000:]
    assert out.returncode == 0, shown
    routed = re.search(r"answered by (\S+) \(tier premium\); request id (rg-t[0-9a-f]+)", out.stdout)
    assert routed is not None and routed.group(1) in MODELS, shown
    assert f"[{routed.group(1)}, a mock answer] Write a haiku about routers" in out.stdout
    streamed = re.search(r"economy tier, streamed, answered by (\S+): \[(\S+), a mock answer\] Write a haiku", out.stdout)
    assert streamed is not None and streamed.group(1) == streamed.group(2) and streamed.group(1) in MODELS, shown
    assert f"chose {routed.group(1)}" in out.stdout, shown
    assert "with feedback 1" in out.stdout and "feedback from user: 1" in out.stdout, shown
    assert "mock answers (serve --mock-upstream; not trained on, not budget spend): 2" in out.stdout, shown
    assert "outcomes: success=2" in out.stdout, shown  # the stream's outcome too
    assert "team support: budget $500.00 per month" in out.stdout, shown  # the example's budget, nothing spent yet
    assert "Traceback" not in out.stderr, shown
