"""`erpilot up` as a user runs it: a process of its own whose output is read as it comes, and the processes
below it found by what they are (a service, a NATS server, the PostgreSQL postmaster), as `ps` shows them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from erpilot.stack.stack import free_port


class UpProcess:
    """`python -m erpilot up ARGS` with its own data dir and nothing of the caller's ERPILOT_* environment."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("ERPILOT_")}
        self.data_dir = data_dir
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "erpilot", "up", "--port", str(self.port), *args],
            env={**base, "ERPILOT_DATA_DIR": str(data_dir), **(env or {})}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, process_group=0)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, pattern: str, timeout: float = 120.0, *, after: int = 0) -> int:
        """Wait until a line from index `after` on matches `pattern` (a regex); its index."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for index in range(after, len(self.lines)):
                if re.search(pattern, self.lines[index]):
                    return index
            if self.process.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no line matching {pattern!r} within {timeout:.0f} s; output:\n{self.output[-4000:]}")

    def wait_running(self, timeout: float = 240.0) -> None:
        self.wait_line(r"^Press Ctrl-C to stop\.", timeout)

    @property
    def token(self) -> str:
        return next(line.split(":", 1)[1].strip() for line in self.lines if line.startswith("  dev token"))

    @property
    def gateway_urls(self) -> list[str]:
        line = next(line for line in self.lines if line.startswith("  API:"))
        return re.findall(r"http://127\.0\.0\.1:\d+(?=\s)", line + " ")

    def processes(self) -> dict[int, tuple[int, list[str]]]:
        """Every living process below `up`: pid -> (parent pid, command line)."""
        table: dict[int, tuple[int, list[str]]] = {}
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                    argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
                except OSError:
                    continue
                if fields[0] != "Z":
                    table[int(proc.name)] = (int(fields[1]), argv)
        below, frontier = {}, {self.process.pid}
        while frontier:
            found = {pid: entry for pid, entry in table.items() if entry[0] in frontier and pid not in below}
            below.update(found)
            frontier = set(found)
        return below

    def pids(self, kind: str) -> list[int]:
        """The processes of one kind: a service name (every replica), "nats" (every node) or "postgres" (the
        postmaster, a direct child of `up`)."""
        found = []
        for pid, (parent, argv) in self.processes().items():
            program = Path(argv[0]).name if argv and argv[0] else ""
            if kind == "nats" and program == "nats-server":
                found.append(pid)
            elif kind == "postgres" and program == "postgres" and parent == self.process.pid:
                found.append(pid)
            elif argv[1:5] == ["-m", "erpilot", "serve", kind]:
                found.append(pid)
        return sorted(found)

    def send(self, sig: int) -> None:
        if sig == signal.SIGINT:  # Ctrl-C: the terminal signals the whole foreground process group
            os.killpg(self.process.pid, sig)
        else:
            self.process.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 90.0) -> int:
        self.send(sig)
        code = self.process.wait(timeout)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """Never leave a stack running (a test that failed early)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def answers(base_url: str, token: str, timeout: float = 15.0) -> str | None:
    """One probe through a gateway that needs every service, NATS and PostgreSQL: open a session, run a read
    tool (gateway -> agent -> ERP), list approvals (approval service). None when all answered 2xx, else what
    went wrong."""
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base_url, headers=headers, timeout=timeout) as client:
            session = client.post("/v1/sessions", json={})
            if session.status_code != 201:
                return f"POST /v1/sessions: {session.status_code} {session.text[:200]}"
            call = client.post(f"/v1/sessions/{session.json()['session_id']}/tool-calls",
                               json={"tool": "get_product", "arguments": {"sku": "SKU-PAPER-A4"}})
            if call.status_code != 200 or call.json().get("outcome") != "succeeded":
                return f"get_product: {call.status_code} {call.text[:200]}"
            approvals = client.get("/v1/approvals")
            if approvals.status_code != 200:
                return f"GET /v1/approvals: {approvals.status_code} {approvals.text[:200]}"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def answered_within(base_url: str, token: str, seconds: float) -> tuple[float | None, str | None]:
    """Probe until one probe is answered: (seconds it took, None), or (None, the last problem) after `seconds`."""
    started = time.monotonic()
    problem = None
    while time.monotonic() - started < seconds:
        problem = answers(base_url, token, timeout=min(15.0, max(1.0, seconds - (time.monotonic() - started))))
        if problem is None:
            return time.monotonic() - started, None
        time.sleep(0.2)
    return None, problem
