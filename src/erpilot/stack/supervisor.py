"""Runs the service processes of `erpilot up` and the e2e tests: start, watch, restart what dies, stop in order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from erpilot.stack.restarts import RestartPolicy, Watch
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


class StopRequested(BaseException):
    """SIGINT/SIGTERM arrived while the caller was still starting things: unwind, then stop what started.

    A BaseException (like KeyboardInterrupt), so no ``except Exception`` on the way swallows it. Raised at most
    once per Supervisor: the supervisor is "stopping" from then on, and later signals are only recorded.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


class Restartable(Protocol):
    """A process that another object starts and restarts (the embedded NATS server or PostgreSQL)."""

    process: subprocess.Popen | None
    log_path: Path

    def start(self) -> object: ...


class Supervisor:
    """Starts named child processes, restarts those that die (in `wait()`), and stops them all, newest first.

    Signals: after `handle_signals()`, SIGINT/SIGTERM mean "stop everything in order". While the caller is
    still starting things, the first one raises StopRequested; inside `wait()` it makes `wait()` return 0;
    once stopping, it is only recorded. So a signal stops the stack the same way wherever it lands.
    """

    def __init__(self, log_dir: Path, *, stop_timeout: float = 10.0, restart: RestartPolicy | None = None,
                 report: TextIO | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.stop_timeout = stop_timeout
        self.restart_policy = restart or RestartPolicy()
        self.report = report  # where wait() tells what it restarts (None: standard error)
        self.children: dict[str, Child] = {}  # insertion order is start order
        self.servers: dict[str, Restartable] = {}  # started by others, restarted here
        self.stop_signal: int | None = None  # set when SIGINT/SIGTERM arrived
        self._phase = "starting"  # starting -> waiting -> stopping (signals raise only while starting)
        self._watches: dict[str, Watch] = {}
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

    def watch(self, name: str, server: Restartable) -> None:
        """Restart `server` (its own `start()`) in `wait()` when its process dies; stopping it stays the
        caller's business."""
        self.servers[name] = server

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

    def begin_stop(self) -> None:
        """From now on a signal only records itself: what follows is the orderly stop."""
        self._phase = "stopping"

    def stop_all(self) -> None:
        """Stop every child, newest first (services before what they depend on)."""
        self.begin_stop()
        for name in reversed(list(self.children)):
            self.stop(name)

    def check(self) -> list[ChildExit]:
        """Return children that exited unexpectedly since the last check."""
        exits = []
        for child in self.children.values():
            if child.process is not None and not child.expected_exit and child.process.poll() is not None:
                child.expected_exit = True  # report once
                exits.append(ChildExit(child.name, child.process.returncode, log_tail(child.log_path)))
        return exits

    def handle_signals(self) -> None:
        """Turn SIGINT/SIGTERM into an orderly stop (see the class): install the handler, once."""

        def on_signal(signum: int, _frame: object) -> None:
            self.stop_signal = signum
            if self._phase == "starting":
                self._phase = "stopping"  # before raising: never a second StopRequested
                raise StopRequested(signum)

        if not self._saved_handlers:
            sigs = (signal.SIGINT, signal.SIGTERM)
            self._saved_handlers = {sig: signal.signal(sig, on_signal) for sig in sigs}

    def restore_signals(self) -> None:
        """Put back the SIGINT/SIGTERM handlers that handle_signals replaced."""
        for sig, handler in self._saved_handlers.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._saved_handlers = {}

    def wait(self, poll: float = 0.2) -> int:
        """Keep every process running until SIGINT/SIGTERM (then stop the children, return 0), or until one
        process exits `restart_policy.max_exits` times within its window (report it, stop, return 1).

        A child that dies unexpectedly, or a watched server whose process dies, is started again after the
        policy's backoff, with "restarted <name>" reported.
        """
        installed = not self._saved_handlers
        self.handle_signals()
        if self._phase == "starting":  # a signal that came before this line has raised already
            self._phase = "waiting"
        try:
            while self.stop_signal is None:
                gave_up = self._heal(time.monotonic())
                if gave_up:
                    self._say(gave_up)
                    return 1
                time.sleep(poll)
            return 0
        finally:
            self.stop_all()
            if installed:
                self.restore_signals()

    def _heal(self, now: float) -> str | None:
        """Count new exits and restart what is due; the give-up message when a process exits too often."""
        policy = self.restart_policy
        for name, code, log_path in self._new_exits():
            watch = self._watches.setdefault(name, Watch())
            delay = watch.exited(now, policy)
            if delay is None:
                return (f"{name} exited {len(watch.exits)} times within {policy.window:.0f} s (last: code {code}); "
                        f"stopping everything. Last lines of {log_path}:\n{log_tail(log_path)}")
            self._say(f"{name} exited with code {code}; restarting it in {delay:.1f} s (log: {log_path})")
        for name, watch in self._watches.items():
            if watch.restart_at is not None and watch.restart_at <= now and self.stop_signal is None:
                watch.restart_at = None
                try:
                    if name in self.children:
                        self.restart(name)
                    else:
                        self.servers[name].start()
                except Exception as exc:  # counted as one more exit by the next round
                    self._say(f"could not restart {name}: {exc}")
                    if name in self.servers:
                        watch.counted = None
                    else:
                        self.children[name].expected_exit = False
                    continue
                self._say(f"restarted {name}")
        return None

    def _new_exits(self) -> list[tuple[str, int | None, Path]]:
        """(name, exit code, log) of every child and watched server that died since the last call."""
        exits = [(e.name, e.returncode, self.children[e.name].log_path) for e in self.check()]
        for name, server in self.servers.items():
            watch = self._watches.setdefault(name, Watch())
            process = server.process
            if watch.restart_at is None and watch.counted is not process and (
                    process is None or process.poll() is not None):
                watch.counted = process
                exits.append((name, None if process is None else process.returncode, server.log_path))
        return exits

    def _say(self, text: str) -> None:
        print(text, file=self.report or sys.stderr, flush=True)

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

