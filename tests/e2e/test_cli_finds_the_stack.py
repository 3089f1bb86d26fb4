"""Daily use beside `./dev up` (issue 27): `erpilot audit` and `erpilot dlq` find the running stack from
ERPILOT_DATA_DIR alone, as `erpilot token` does; once the stack stops they say what to set."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

from erpilot.stack.running import STACK_FILE
from erpilot.stack.stack import free_port
from erpilot_platform.testing.backends import postgres_scratch_dir

pytestmark = pytest.mark.e2e


def _erpilot(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "erpilot", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_audit_and_dlq_find_the_up_stack_from_the_data_dir_alone():
    data_dir = postgres_scratch_dir()  # outside pytest's tmp tree: the embedded PostgreSQL runs as another user
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERPILOT_")}
    env["ERPILOT_DATA_DIR"] = str(data_dir)
    up = subprocess.Popen([sys.executable, "-m", "erpilot", "up", "--port", str(free_port())], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, lines = time.monotonic() + 120, []
        while time.monotonic() < deadline and (line := up.stdout.readline()):
            lines.append(line)
            if "Press Ctrl-C" in line:
                break
        assert "Erpilot is running." in "".join(lines), "".join(lines)
        recorded = data_dir / STACK_FILE
        assert stat.S_IMODE(recorded.stat().st_mode) == 0o600  # a database URL may carry a password
        assert set(json.loads(recorded.read_text())) >= {"database_url", "nats_url", "gateway_urls"}

        verified = _erpilot(env, "audit", "verify")
        assert verified.returncode == 0, verified.stderr
        assert "audit log intact" in verified.stdout
        exported = _erpilot(env, "audit", "export")
        assert exported.returncode == 0, exported.stderr
        listed = _erpilot(env, "dlq", "list")
        assert listed.returncode == 0, listed.stderr
    finally:
        up.terminate()
        up.wait(timeout=60)
    try:
        assert not (data_dir / STACK_FILE).exists()  # a stopped stack leaves no URL behind
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_without_a_running_stack_the_command_names_what_to_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERPILOT_")}
    env["ERPILOT_DATA_DIR"] = str(tmp_path)
    refused = _erpilot(env, "audit", "verify")
    assert refused.returncode != 0
    assert "ERPILOT_NATS_URL is not set and no `erpilot up` runs in" in refused.stderr
