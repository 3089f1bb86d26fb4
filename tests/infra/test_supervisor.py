"""Supervisor: stops children in order, kills the stubborn, reports crashes, restarts what dies (and gives up on
a crash loop), stops in order on a signal wherever it lands, leaves no orphan."""

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from erpilot.stack.restarts import RestartPolicy
from erpilot.stack.supervisor import StopRequested, Supervisor

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


SUPERVISOR_SCRIPT = textwrap.dedent(f"""
    import sys
    from pathlib import Path
    from erpilot.stack.supervisor import Supervisor
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


# --- healing: wait() restarts what dies, gives up on a crash loop -------------------------------------------
SLEEPER = [PY, "-c", "import time; print('up', flush=True); time.sleep(600)"]
FAST = RestartPolicy(first_delay=0.1, max_delay=0.4)


def _in_thread(action, delay: float = 0.0) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_until(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.05)


class Server:
    """A Restartable as the embedded servers are: a process another object starts (its own start())."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.process = subprocess.Popen(SLEEPER, stdout=subprocess.DEVNULL)


def test_wait_restarts_a_killed_child_and_a_killed_server_then_stops_on_a_signal(tmp_path: Path) -> None:
    report = io.StringIO()
    sup = Supervisor(tmp_path, stop_timeout=2.0, restart=FAST, report=report)
    server = Server(tmp_path / "server.log")
    server.start()
    sup.watch("db", server)
    child = sup.start("svc", SLEEPER)
    first_child, first_server = child.pid, server.process.pid

    def break_things() -> None:
        os.kill(first_child, signal.SIGKILL)
        os.kill(first_server, signal.SIGKILL)
        _wait_until(lambda: "restarted svc" in report.getvalue() and "restarted db" in report.getvalue())
        os.kill(os.getpid(), signal.SIGTERM)  # then stop, as a service manager would

    try:
        helper = _in_thread(break_things, delay=0.3)
        assert sup.wait(poll=0.05) == 0
        helper.join(5)
    finally:
        sup.stop_all()
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
    text = report.getvalue()
    assert "svc exited with code -9; restarting it in 0.1 s" in text and "db exited with code -9" in text, text
    assert child.pid != first_child and server.starts == 2, text
    assert not child.running()  # stopped by the signal, in order


def test_a_child_that_keeps_dying_stops_everything_on_its_fifth_exit_with_growing_backoff(tmp_path: Path) -> None:
    report = io.StringIO()
    sup = Supervisor(tmp_path, stop_timeout=2.0, restart=FAST, report=report)
    healthy = sup.start("healthy", SLEEPER)
    sup.start("crasher", [PY, "-c", "import sys; print('boom', flush=True); sys.exit(3)"])
    started = time.monotonic()
    assert sup.wait(poll=0.02) == 1
    text = report.getvalue()
    delays = [float(line.split("restarting it in ")[1].split()[0]) for line in text.splitlines()
              if line.startswith("crasher exited with code 3; restarting")]
    assert delays == [0.1, 0.2, 0.4, 0.4], text  # doubled, capped
    assert text.count("restarted crasher") == 4, text
    assert "crasher exited 5 times within 60 s (last: code 3); stopping everything" in text, text
    assert "boom" in text  # with the log's last lines
    assert not healthy.running() and time.monotonic() - started >= 1.1
    assert sup.check() == []


def test_exits_spread_wider_than_the_window_never_give_up(tmp_path: Path) -> None:
    report = io.StringIO()
    sup = Supervisor(tmp_path, stop_timeout=2.0, report=report,
                     restart=RestartPolicy(max_exits=2, window=0.5, first_delay=0.05, max_delay=0.05))
    child = sup.start("svc", SLEEPER)

    def kill_three_times() -> None:
        for _ in range(3):  # one exit per 0.8 s: never two inside the 0.5 s window
            pid = child.pid
            os.kill(pid, signal.SIGKILL)
            _wait_until(lambda p=pid: child.pid != p and child.running())
            time.sleep(0.8)
        os.kill(os.getpid(), signal.SIGINT)

    helper = _in_thread(kill_three_times, delay=0.2)
    assert sup.wait(poll=0.02) == 0, report.getvalue()
    helper.join(5)
    assert report.getvalue().count("restarted svc") == 3


# --- signals: one orderly stop wherever the signal lands ------------------------------------------------------
def test_a_signal_during_start_up_raises_once_and_later_ones_are_only_recorded(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path, stop_timeout=2.0)
    sup.handle_signals()
    try:
        child = sup.start("svc", SLEEPER)
        with pytest.raises(StopRequested):  # start-up is unwound ...
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # (never reached: the handler raises at the next bytecode)
        os.kill(os.getpid(), signal.SIGTERM)  # ... and a second signal while stopping changes nothing
        time.sleep(0.1)
        sup.stop_all()
        assert sup.stop_signal == signal.SIGTERM and not child.running()
        assert sup.wait(poll=0.02) == 0  # stopping already: returns at once
    finally:
        sup.restore_signals()


def test_a_signal_between_start_up_and_wait_still_ends_in_an_orderly_stop(tmp_path: Path) -> None:
    """The flaky case of `erpilot up`: the signal lands after start-up printed its banner, before wait()."""
    sup = Supervisor(tmp_path, stop_timeout=2.0)
    sup.handle_signals()
    child = sup.start("svc", SLEEPER)
    try:
        with pytest.raises(StopRequested):
            os.kill(os.getpid(), signal.SIGINT)
            sup.wait(poll=0.02)
        assert sup.wait(poll=0.02) == 0 and not child.running()
    finally:
        sup.stop_all()
        sup.restore_signals()
