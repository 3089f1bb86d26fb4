"""Runs the peers of `erpilot bench --peer`, each in the virtual environment ``.venv-peer``.

The environment (``.venv-peer`` at the repository root) is made from the locked ``peer`` dependency
group with uv (``uv sync --frozen --only-group peer``): LangGraph and DBOS never enter the services' or
the dev environment. The peers run one after the other, after the product's services have stopped:

- LangGraph: ``benchmarks/peer_langgraph.py``, the project's port of ``../shared/bench/peer_langgraph.py``
  (same graph, saver and phases; it differs in that it measures with ``erpilot.bench.meter``, so its
  PostgreSQL's CPU and write transactions count, which the shared script does not measure), on a database
  of its own on the benchmark's PostgreSQL (the write-transaction counter is cluster-wide).
- DBOS: ``peer_dbos.py`` of the shared peers folder (``../shared/bench`` beside the repository, looked up
  from the repository upwards, or ``ERPILOT_BENCH_PEERS``), run where it is, not copied; it starts its own
  PostgreSQL and measures its CPU and that PostgreSQL's itself.

Each peer's JSON is brought to one shape per level (``normalize_*``, pure): ``concurrency``, ``cycles``,
``cycles_per_s``, ``start_to_interrupt`` and ``resume_to_committed`` (summaries in ms), ``cpu_ms``
(``peer``, ``postgres``, ``total``), ``commits`` and ``write_xacts`` per cycle.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
LANGGRAPH_SCRIPT = REPO / "benchmarks" / "peer_langgraph.py"
PEER_VENV = REPO / ".venv-peer"
SHARED_PEERS_ENV = "ERPILOT_BENCH_PEERS"


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


def shared_peers_dir(start: Path = REPO, environ: dict[str, str] | None = None) -> Path:
    """The shared peers folder: ``$ERPILOT_BENCH_PEERS``, else the first ``shared/bench`` beside the
    repository or beside one of its parents (a git worktree may sit one level deeper than the clone)."""
    environ = os.environ if environ is None else environ
    if environ.get(SHARED_PEERS_ENV):
        candidates = [Path(environ[SHARED_PEERS_ENV])]
    else:
        candidates = [parent / "shared" / "bench" for parent in start.parents]
    for folder in candidates:
        if (folder / "peer_dbos.py").is_file():
            return folder
    raise RuntimeError(f"no peer_dbos.py in {', '.join(map(str, candidates))}: the DBOS peer lives in "
                       f"../shared/bench beside the repository (or set {SHARED_PEERS_ENV})")


def peer_database_url(database_url: str, name: str = "peer") -> str:
    """The same server's URL with another database name (libpq URL, unix socket in ``?host=``)."""
    from erpilot.bench.db import admin_url

    return admin_url(database_url, name)[0]


def _run_json(argv: list[str], name: str) -> dict:
    """Run a peer script; its JSON summary is the last line it prints."""
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"the {name} peer failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_langgraph(python: Path, database_url: str, levels: list[int], cycles: int) -> dict:
    raw = _run_json([str(python), str(LANGGRAPH_SCRIPT), "--database-url", database_url, "--json",
                     "--levels", ",".join(map(str, levels)), "--cycles", str(cycles)], "LangGraph")
    return normalize_langgraph(raw, str(LANGGRAPH_SCRIPT.relative_to(REPO)))


def run_dbos(python: Path, levels: list[int], cycles: int) -> dict:
    """Sequential (1 in flight) and each level above 1; the shared script's extra variant is skipped."""
    script = shared_peers_dir() / "peer_dbos.py"
    concurrent = [level for level in levels if level > 1]
    # the script always runs a concurrent phase: with no level above 1 it is one cycle, and dropped
    argv = [str(python), str(script), "--json", "--seq-n", str(cycles), "--conc-n", str(cycles if concurrent else 1),
            "--concurrency", ",".join(map(str, concurrent or [1])), "--no-transaction-variant"]
    raw = _run_json(argv, "DBOS")
    return normalize_dbos(raw, str(script), measured_levels=levels)


def normalize_langgraph(raw: dict, script: str) -> dict:
    """benchmarks/peer_langgraph.py already reports per level in the shared shape."""
    probe = raw.get("duplicate_resume_probe") or {}
    return {"script": script, "versions": raw.get("versions", {}), "levels": raw["levels"],
            "exactly_once": (raw.get("verify") or {}).get("exactly_once"),
            "duplicate_probe": f"a double resume ran execute {probe.get('execute_node_runs')}× for "
                               f"{probe.get('threads')} threads"}


def normalize_dbos(raw: dict, script: str, measured_levels: list[int]) -> dict:
    """peer_dbos.py's phases (``sequential``, ``concurrent``, ``concurrent_<n>``) as levels."""
    phases = [raw[key] for key in raw  # not the execute=transaction variant's phases
              if key == "concurrent" or (key.startswith("concurrent_") and key[len("concurrent_"):].isdigit())]
    levels, seen = [], set()
    for phase in sorted([raw["sequential"], *phases], key=lambda p: p["concurrency"]):  # stable: sequential first
        if phase["concurrency"] not in measured_levels or phase["concurrency"] in seen:
            continue
        seen.add(phase["concurrency"])
        db = phase.get("db") or {}
        levels.append({
            "concurrency": phase["concurrency"], "cycles": phase["cycles"], "cycles_per_s": phase["cycles_per_s"],
            "start_to_interrupt": phase["start_to_interrupt"], "resume_to_committed": phase["resume_to_committed"],
            "cpu_ms": {"peer": phase["client_cpu_ms_per_cycle"], "postgres": phase["postgres_cpu_ms_per_cycle"],
                       "total": phase["client_plus_postgres_cpu_ms_per_cycle"]},
            "commits": db.get("commits_per_cycle"), "write_xacts": db.get("write_xacts_per_cycle"),
        })
    probe = raw.get("duplicate_probe") or {}
    return {"script": script, "versions": raw.get("versions", {}), "levels": levels,
            "exactly_once": (raw.get("verify") or {}).get("exactly_once"),
            "duplicate_probe": f"a double start and approval ran execute {probe.get('execute_runs')}× for "
                               f"{probe.get('workflows')} workflows"}
