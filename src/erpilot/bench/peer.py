"""Runs benchmarks/peer_langgraph.py for `erpilot bench --peer`, in a virtual environment of its own.

The environment (``.venv-peer`` at the repository root) is made from the locked ``peer`` dependency
group with uv (``uv sync --frozen --only-group peer``): LangGraph never enters the services' or the
dev environment. The peer gets a database of its own on the benchmark's PostgreSQL, after the
product's services have stopped (the write-transaction counter is cluster-wide).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "benchmarks" / "peer_langgraph.py"
PEER_VENV = REPO / ".venv-peer"


def find_uv() -> str:
    """uv as ./dev finds it: on PATH, else the copy ./dev installs into .tools/."""
    found = shutil.which("uv") or (str(REPO / ".tools" / "bin" / "uv") if (REPO / ".tools/bin/uv").exists() else None)
    if not found:
        raise RuntimeError("uv not found: run ./dev once (it installs uv into .tools/), or install uv")
    return found


def ensure_peer_env() -> Path:
    """Create or update .venv-peer from uv.lock's ``peer`` group; return its interpreter."""
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(PEER_VENV)}
    subprocess.run([find_uv(), "sync", "--frozen", "--only-group", "peer", "--quiet"],
                   cwd=REPO, env=env, check=True)
    return PEER_VENV / "bin" / "python"


def peer_database_url(database_url: str, name: str = "peer") -> str:
    """The same server's URL with another database name (libpq URL, unix socket in ``?host=``)."""
    from erpilot.bench.db import admin_url

    return admin_url(database_url, name)[0]


def run_peer(python: Path, database_url: str, levels: list[int], cycles: int) -> dict:
    """Run the peer script; its JSON summary is the last line it prints."""
    argv = [str(python), str(SCRIPT), "--database-url", database_url, "--json",
            "--levels", ",".join(map(str, levels)), "--cycles", str(cycles)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"the peer failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
