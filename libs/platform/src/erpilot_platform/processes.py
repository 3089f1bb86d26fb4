"""Child processes that die with their parent: the rules every embedded server and supervised service follows."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """Return a preexec_fn that makes the child get `sig` when the calling thread dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: nothing to resolve in the child
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: nobody would ever signal us
            os._exit(1)

    return preexec


def log_tail(path: Path, lines: int = 30) -> str:
    """Return the last lines of a log file, or '' if it cannot be read."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
    """Send `sig`, wait up to `timeout` seconds, then SIGKILL; return the exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def _spawn(argv: list[str], log_path: Path, death_sig: int, **kwargs) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            process_group=0, preexec_fn=die_with_parent(death_sig), **kwargs,
        )
