"""`erpilot torture --runs 1` at every failpoint of docs/FAILPOINTS.md, in every service that reaches it (SPEC §8:
exactly one effect under a crash at any failpoint): the shipped command, on a NATS server of its own and a fresh
database of the session's PostgreSQL server (the "given servers" path), bounded in time. ERPILOT_TORTURE_RUNS
raises N (one run already crashes every target; `tests/unit/test_torture_*` show each check can fail). About
6 s per run on a loaded 2-core machine: 15 targets, about 1.5 minutes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from erpilot.torture.targets import targets
from erpilot_platform.testing.backends import scratch_database

pytestmark = pytest.mark.e2e
RUNS = int(os.environ.get("ERPILOT_TORTURE_RUNS", "1"))


@pytest.fixture
def fresh_database(database_url):
    with scratch_database(database_url, "erpilot_torture") as url:
        yield url


@pytest.mark.timeout(60 * 60)
def test_every_failpoint_survives_a_seeded_crash_campaign(tmp_path, fresh_database):
    env = {k: v for k, v in os.environ.items() if k != "ERPILOT_NATS_URL"}
    env["ERPILOT_DATABASE_URL"] = fresh_database
    done = subprocess.run(
        [sys.executable, "-m", "erpilot", "torture", "--runs", str(RUNS), "--seed", "1000",
         "--data-dir", str(tmp_path / "torture")],
        env=env, capture_output=True, text=True, timeout=55 * 60)
    report = done.stdout + done.stderr[-4000:]
    assert done.returncode == 0, report
    labels = {t.label for t in targets()}
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line.split()[:1]
            and line.split()[0] in labels}
    assert set(rows) == labels, report  # every failpoint had its runs, in every service that reaches it
    for name, (runs, crashed, lost, doubled, violations, _) in rows.items():
        assert int(runs) == RUNS, report
        assert int(crashed) == RUNS, f"{name} was not reached in every run:\n{report}"  # each run really crashed
        assert (lost, doubled, violations) == ("0", "0", "0"), report
