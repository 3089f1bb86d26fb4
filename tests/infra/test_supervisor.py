"""Supervisor: stops children in order, kills the stubborn, reports crashes, leaves no orphan."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from erpilot.supervisor import Supervisor, wait_http_ready

pytestmark = pytest.mark.integration

PY = sys.executable
IGNORE_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"
)


def _on_term_append(name: str, path: Path) -> list[str]:
    """A child that appends its name to `path` when it gets SIGTERM."""
    code = textwrap.dedent(f"""
        import signal, sys, time
        def bye(*_):
            open({str(path)!r}, "a").write({name!r} + "\\n")
            sys.exit(0)
        signal.signal(signal.SIGTERM, bye)
        print("ready", flush=True)
        time.sleep(600)
    """)
    return [PY, "-c", code]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pids: list[int], timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (alive := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def test_stop_all_in_reverse_order(tmp_path: Path) -> None:
    order = tmp_path / "order"
    with Supervisor(tmp_path / "logs") as sup:
        first = sup.start("first", _on_term_append("first", order))
        second = sup.start("second", _on_term_append("second", order))
        for child in (first, second):  # each has installed its handler
            wait_for_line(child.log_path, "ready")
    assert order.read_text().split() == ["second", "first"]
    assert all(c.process.returncode == 0 for c in sup.children.values())


def test_child_ignoring_sigterm_is_killed(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path, stop_timeout=1.0)
    child = sup.start("stubborn", [PY, "-c", IGNORE_TERM])
    wait_for_line(child.log_path, "up")
    started = time.monotonic()
    assert sup.stop("stubborn") == -signal.SIGKILL
    assert time.monotonic() - started >= 0.9  # it was given its grace period first (no upper bound: a loaded host)
    assert sup.check() == []  # a stop we asked for is not a crash


def test_unexpected_exit_is_reported_once_and_restart_works(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    try:
        sup.start("crasher", [PY, "-c", "print('boom at startup'); raise SystemExit(3)"])
        child = sup.start("svc", [PY, "-c", "import time; time.sleep(600)"])
        deadline = time.monotonic() + 30
        while not (exits := sup.check()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(e.name, e.returncode) for e in exits] == [("crasher", 3)]
        assert "boom at startup" in exits[0].log_tail and "crasher exited with code 3" in str(exits[0])
        assert sup.check() == []

        old_pid = child.pid
        os.kill(old_pid, signal.SIGKILL)  # a crash from outside, as a fault test does
        child.process.wait()
        assert [(e.name, e.returncode) for e in sup.check()] == [("svc", -signal.SIGKILL)]
        sup.restart("svc")
        assert child.running() and child.pid != old_pid
        assert list(sup.children) == ["crasher", "svc"]
        sup.kill("svc")  # deliberate crash: not reported
        assert sup.check() == []
    finally:
        sup.stop_all()


def test_wait_http_ready(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Supervisor(tmp_path) as sup:
        web = sup.start("web", [PY, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=tmp_path)
        wait_http_ready(f"http://127.0.0.1:{port}/", 10, child=web)
        dead = sup.start("dead", [PY, "-c", "raise SystemExit('cannot bind')"])
        with pytest.raises(RuntimeError, match="dead exited"):
            wait_http_ready("http://127.0.0.1:9/", 10, child=dead)
        with pytest.raises(TimeoutError):
            wait_http_ready("http://127.0.0.1:9/", 0.3)


SUPERVISOR_SCRIPT = textwrap.dedent(f"""
    import sys
    from pathlib import Path
    from erpilot.supervisor import Supervisor
    sup = Supervisor(Path(sys.argv[1]), stop_timeout=1.0)
    ignore = {IGNORE_TERM!r}
    a = sup.start("a", [sys.executable, "-c", "import time; time.sleep(600)"])
    b = sup.start("b", [sys.executable, "-c", ignore])
    print(a.pid, b.pid, flush=True)
    sys.exit(sup.wait())
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_no_orphan_when_the_supervisor_is_signalled(tmp_path: Path, sig: signal.Signals) -> None:
    proc = subprocess.Popen([PY, "-c", SUPERVISOR_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        wait_for_line(tmp_path / "b.log", "up")  # `b` ignores SIGTERM from now on
        proc.send_signal(sig)
        code = proc.wait(10)
        assert code == (-signal.SIGKILL if sig == signal.SIGKILL else 0)
        assert _wait_dead(pids) == []
    finally:
        proc.kill()
        proc.wait()


def wait_for_line(path: Path, text: str, timeout: float = 30.0) -> None:
    """Wait until a log file has the line `text` (the start header also quotes the command)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text().splitlines():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{text!r} not in {path}")
