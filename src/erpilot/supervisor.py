"""Runs the service processes of `erpilot up` and the e2e tests: start, watch, restart, stop in order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from erpilot_platform.processes import die_with_parent, log_tail


@dataclass
class Child:
    """One supervised process and what is needed to start it again."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    cwd: Path | None = None
    process: subprocess.Popen | None = None
    expected_exit: bool = False  # we stopped it (or already reported its exit): do not report it

    @property
    def pid(self) -> int | None:
        """The current process id, if started."""
        return self.process.pid if self.process else None

    def running(self) -> bool:
        """Whether the process is alive."""
        return self.process is not None and self.process.poll() is None


@dataclass
class ChildExit:
    """A child that exited without being asked to."""

    name: str
    returncode: int
    log_tail: str

    def __str__(self) -> str:
        return f"{self.name} exited with code {self.returncode}; last log lines:\n{self.log_tail}"


class Supervisor:
    """Starts named child processes and stops them all, newest first, on exit or SIGINT/SIGTERM."""

    def __init__(self, log_dir: Path, *, stop_timeout: float = 10.0) -> None:
        self.log_dir = Path(log_dir)
        self.stop_timeout = stop_timeout
        self.children: dict[str, Child] = {}  # insertion order is start order
        self.stop_signal: int | None = None  # set when SIGINT/SIGTERM arrived
        self._waiting = False
        self._stopping = False
        self._saved_handlers: dict[int, object] = {}

    def start(self, name: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              unset: Sequence[str] = (), log_path: Path | None = None, cwd: Path | None = None) -> Child:
        """Start a child; `env` is added to this process's environment minus the names in `unset`;
        logs go to log_dir/<name>.log."""
        if name in self.children and self.children[name].running():
            raise RuntimeError(f"{name} is already running")
        # Unbuffered Python output, so the log tail shown on a crash is up to date.
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        for variable in unset:
            full_env.pop(variable, None)
        child = Child(name, [str(a) for a in argv], full_env, Path(log_path or self.log_dir / f"{name}.log"),
                      cwd)
        self.children.pop(name, None)  # re-insert: a restarted child is stopped before older ones
        self.children[name] = child
        self._spawn(child)
        return child

    def _spawn(self, child: Child) -> None:
        child.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(child.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} start: {' '.join(child.argv)}\n".encode())
            log.flush()
            # Own process group: a terminal Ctrl-C reaches only us, and we stop children in order.
            # SIGKILL on our death: a child must not outlive us, even if it ignores SIGTERM.
            child.process = subprocess.Popen(
                child.argv, env=child.env, cwd=child.cwd, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, process_group=0, preexec_fn=die_with_parent(signal.SIGKILL),
            )
        child.expected_exit = False

    def restart(self, name: str) -> Child:
        """Stop the child if it is running and start it again with the same command."""
        child = self.children[name]
        self.stop(name)
        self.children.pop(name)
        self.children[name] = child
        self._spawn(child)
        return child

    def stop(self, name: str, timeout: float | None = None) -> int | None:
        """SIGTERM the child's process group, SIGKILL it after the timeout; return its exit code."""
        child = self.children[name]
        proc = child.process
        if proc is None:
            return None
        child.expected_exit = True
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        return proc.returncode

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Crash a child on purpose (fault tests): send `sig` to its group, wait, and do not report it."""
        child = self.children[name]
        assert child.process is not None
        child.expected_exit = True
        if child.process.poll() is None:
            _signal_group(child.process, sig)
        return child.process.wait()

    def stop_all(self) -> None:
        """Stop every child, newest first (services before what they depend on)."""
        self._stopping = True
        try:
            for name in reversed(list(self.children)):
                self.stop(name)
        finally:
            self._stopping = False

    def check(self) -> list[ChildExit]:
        """Return children that exited unexpectedly since the last check."""
        exits = []
        for child in self.children.values():
            if child.process is not None and not child.expected_exit and child.process.poll() is not None:
                child.expected_exit = True  # report once
                exits.append(ChildExit(child.name, child.process.returncode, log_tail(child.log_path)))
        return exits

    def handle_signals(self) -> None:
        """Turn SIGINT/SIGTERM into an orderly stop: wait() returns; elsewhere SystemExit is raised."""

        def on_signal(signum: int, _frame: object) -> None:
            self.stop_signal = signum
            if not (self._waiting or self._stopping):
                raise SystemExit(128 + signum)  # unwinds `with` blocks, so everything is stopped

        if not self._saved_handlers:
            sigs = (signal.SIGINT, signal.SIGTERM)
            self._saved_handlers = {sig: signal.signal(sig, on_signal) for sig in sigs}

    def restore_signals(self) -> None:
        """Put back the SIGINT/SIGTERM handlers that handle_signals replaced."""
        for sig, handler in self._saved_handlers.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._saved_handlers = {}

    def wait(self, poll: float = 0.2) -> int:
        """Block until SIGINT/SIGTERM (return 0) or a child exits unexpectedly (report it, return 1)."""
        installed = not self._saved_handlers
        self.handle_signals()
        self._waiting = True
        try:
            while self.stop_signal is None:
                exits = self.check()
                if exits:
                    for e in exits:
                        print(e, file=sys.stderr)
                    return 1
                time.sleep(poll)
            return 0
        finally:
            self._waiting = False
            self.stop_all()
            if installed:
                self.restore_signals()

    def __enter__(self) -> Supervisor:
        self.handle_signals()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop_all()
        finally:
            self.restore_signals()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    # The child leads its own group (process_group=0); signal the group to reach its own children.
    # Called only before the child is reaped, so the group id cannot have been reused.
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def wait_http_ready(url: str, timeout: float = 30.0, *, child: Child | None = None) -> None:
    """Poll `url` until it answers 2xx; fail early with the log tail if `child` exits meanwhile."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if child is not None and not child.running():
            code = child.process.returncode if child.process else None
            tail = log_tail(child.log_path)
            raise RuntimeError(f"{child.name} exited ({code}) before {url} was ready:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if 200 <= resp.status < 300:
                    return
                last = resp.status
        except (urllib.error.URLError, OSError) as e:  # HTTPError (4xx/5xx) is a URLError too
            last = e
        time.sleep(0.1)
    tail = f"\n{log_tail(child.log_path)}" if child is not None else ""
    raise TimeoutError(f"{url} not ready after {timeout}s (last: {last}){tail}")
