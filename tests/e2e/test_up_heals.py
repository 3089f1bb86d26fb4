"""`erpilot up` heals (SPEC §10, Operations), tried the way a user breaks it: kill -9 each kind of process
under a running `erpilot up` (a replica of every service, a NATS server, the PostgreSQL postmaster) and see
it restarted ("restarted <name>") while HTTP requests keep being answered: by the other replica while one
restarts under `up --cluster 3 --replicas 2`, after the restart under plain `up`. And a crash loop (one process
killed five times within 60 s) stops everything with exit 1.

Each test starts its own `erpilot up` (embedded NATS and PostgreSQL in a scratch dir), as in a terminal.
Plain `up`: about 60-90 s on a 2-core machine; the cluster: about 2-3 minutes (`-m "not heal"` skips both).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from erpilot.stack.stack import SERVICES
from erpilot_platform.testing.backends import postgres_scratch_dir
from tests.e2e.conftest import wait_for
from tests.e2e.up_process import UpProcess, alive, answered_within

pytestmark = [pytest.mark.e2e, pytest.mark.heal]
# A probe right after a replica died must be answered by the other replica within this (no restart needed).
SURVIVOR_SECONDS = 10.0
# NATS' own re-election of the raft groups a killed node led takes 4-9 s (fixed in nats-server).
NATS_NODE_SECONDS = 30.0
RESTART_SECONDS = 90.0  # a restarted process (PostgreSQL's crash recovery included) answering again


@pytest.fixture
def up_data_dir():
    """Outside pytest's tmp tree: as root PostgreSQL runs as another user, who must traverse every parent."""
    path = postgres_scratch_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def http_port_of(pid: int) -> int | None:
    """The HTTP port a gateway process serves on (its ERPILOT_HTTP_PORT)."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    for item in environ:
        if item.startswith(b"ERPILOT_HTTP_PORT="):
            return int(item.split(b"=", 1)[1])
    return None


def kill_and_see_restarted(up: UpProcess, pid: int, name_pattern: str) -> tuple[float, str]:
    """SIGKILL `pid`; wait for "restarted <name>"; (seconds until then, the name)."""
    mark, killed = len(up.lines), time.monotonic()
    os.kill(pid, signal.SIGKILL)
    index = up.wait_line(rf"^restarted {name_pattern}$", RESTART_SECONDS, after=mark)
    return time.monotonic() - killed, up.lines[index].split()[1]


def test_plain_up_restarts_every_kind_of_process_killed_with_sigkill(up_data_dir):
    up = UpProcess(up_data_dir)
    try:
        up.wait_running()
        base, token = up.gateway_urls[0], up.token
        took, problem = answered_within(base, token, 60)
        assert problem is None, problem
        figures = {}
        for kind in (*SERVICES, "nats", "postgres"):
            [pid] = up.pids(kind)  # one process of each kind under plain `up`
            killed = time.monotonic()
            restarted, name = kill_and_see_restarted(up, pid, kind)
            assert name == kind and not alive(pid)
            took, problem = answered_within(base, token, RESTART_SECONDS)
            assert problem is None, f"nothing answered after {kind} was restarted: {problem}\n{up.output[-3000:]}"
            figures[kind] = {"restarted after s": round(restarted, 1),
                             "answered after s": round(time.monotonic() - killed, 1)}
        print("\nplain up, kill -9 of each kind:\n" + json.dumps(figures, indent=1))
        assert "stopping everything" not in up.output, up.output

        # A crash loop: the agent killed again as soon as it is back. Its fifth exit within 60 s (the kill above
        # may be one of them) stops everything.
        below = set(up.processes())
        for _ in range(5):
            if "stopping everything" in up.output:
                break
            mark = len(up.lines)
            [pid] = up.pids("agent")
            os.kill(pid, signal.SIGKILL)
            up.wait_line(r"^restarted agent$|stopping everything", RESTART_SECONDS, after=mark)
        assert up.process.wait(60) == 1, up.output
        assert "agent exited 5 times within 60 s (last: code -9); stopping everything" in up.output, up.output
        up.wait_line(r"^stopped\.$", 30)
    finally:
        up.kill()
    wait_for(lambda: not [pid for pid in below if alive(pid)], timeout=30)  # nothing outlived `erpilot up`


@pytest.mark.cluster
def test_cluster_up_keeps_answering_while_a_killed_process_restarts(up_data_dir):
    up = UpProcess(up_data_dir, "--cluster", "3", "--replicas", "2")
    try:
        up.wait_running(timeout=300)
        urls, token = up.gateway_urls, up.token
        assert len(urls) == 2, up.output
        for url in urls:  # every replica has come up (the banner waits for the gateways only)
            took, problem = answered_within(url, token, 120)
            assert problem is None, problem
        figures = {}
        for kind in SERVICES:
            pids = up.pids(kind)
            assert len(pids) == 2, (kind, pids)
            victim = pids[0]
            # The gateway that survives (the killed one's port refuses meanwhile); any gateway for the others.
            survivor = next(u for u in urls if not u.endswith(f":{http_port_of(victim)}")) \
                if kind == "gateway" else urls[0]
            mark, killed = len(up.lines), time.monotonic()
            os.kill(victim, signal.SIGKILL)
            took, problem = answered_within(survivor, token, SURVIVOR_SECONDS)
            assert problem is None, f"the other {kind} replica did not answer: {problem}\n{up.output[-3000:]}"
            index = up.wait_line(rf"^restarted {kind}(-2)?$", RESTART_SECONDS, after=mark)
            restarted = time.monotonic() - killed
            for url in urls:  # and the restarted replica answers again, the gateway on its own port
                again, problem = answered_within(url, token, RESTART_SECONDS)
                assert problem is None, f"after {up.lines[index]}: {problem}"
            figures[up.lines[index].split()[1]] = {"other replica answered after s": round(took, 2),
                                                   "restarted after s": round(restarted, 1)}
        node = up.pids("nats")[0]
        killed = time.monotonic()
        os.kill(node, signal.SIGKILL)
        took, problem = answered_within(urls[0], token, NATS_NODE_SECONDS)
        assert problem is None, f"the NATS cluster did not answer without a node: {problem}"
        up.wait_line(r"^restarted nats-\d$", RESTART_SECONDS)
        figures["nats node"] = {"answered after s": round(took, 2),
                                "restarted after s": round(time.monotonic() - killed, 1)}
        [postgres] = up.pids("postgres")  # one PostgreSQL: requests are answered again after its restart
        restarted, _ = kill_and_see_restarted(up, postgres, "postgres")
        took, problem = answered_within(urls[1], token, RESTART_SECONDS)
        assert problem is None, f"nothing answered after PostgreSQL was restarted: {problem}"
        figures["postgres"] = {"restarted after s": round(restarted, 1), "answered after s": round(took, 1)}
        print("\nup --cluster 3 --replicas 2, kill -9 of each kind:\n" + json.dumps(figures, indent=1))
        assert "stopping everything" not in up.output, up.output
        assert up.stop(signal.SIGINT) == 0, up.output
        assert up.lines[-1] == "stopped.", up.output
    finally:
        up.kill()
