"""Failpoints armed by the environment or, in a running process, by ERPILOT_FAILPOINTS_FILE."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from erpilot_platform import failpoints

pytestmark = pytest.mark.unit

PROBE = """
import sys, time
from erpilot_platform.failpoints import failpoint
failpoint("probe.first")           # not armed yet: passes
print("passed", flush=True)
sys.stdin.readline()               # the test arms the file meanwhile
failpoint("probe.other")           # armed is probe.first only
print("other passed", flush=True)
failpoint("probe.first")
print("not reached", flush=True)
"""


def test_a_running_process_is_armed_through_its_file(tmp_path):
    spec = tmp_path / "failpoints"
    env = {**os.environ, "ERPILOT_FAILPOINTS_FILE": str(spec)}
    env.pop("ERPILOT_FAILPOINTS", None)
    proc = subprocess.Popen([sys.executable, "-c", PROBE], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "passed"  # a missing file arms nothing
    spec.write_text("probe.first=crash")
    out, _ = proc.communicate("go\n", timeout=60)
    assert proc.returncode == 137
    assert out.split() == ["other", "passed"]


def test_the_file_is_read_again_when_it_changes(tmp_path, monkeypatch):
    spec = tmp_path / "failpoints"
    monkeypatch.setenv("ERPILOT_FAILPOINTS_FILE", str(spec))
    spec.write_text("a=crash")
    assert failpoints._armed_in_file() == {"a": "crash"}
    spec.write_text("a=crash,bb=crash")
    assert failpoints._armed_in_file() == {"a": "crash", "bb": "crash"}
    spec.unlink()
    assert failpoints._armed_in_file() == {}


def test_an_unknown_action_is_refused(tmp_path, monkeypatch):
    spec = tmp_path / "failpoints"
    monkeypatch.setenv("ERPILOT_FAILPOINTS_FILE", str(spec))
    spec.write_text("a=hang")
    with pytest.raises(ValueError, match="only 'crash'"):
        failpoints._armed_in_file()
