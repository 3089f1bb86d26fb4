"""Closed-loop load for the cluster failure test and `erpilot bench --cluster`: approval cycles (request an
``adjust_stock`` write, a manager approves it, wait for its outcome) and read calls, spread over every
gateway replica, failing over to another gateway when one does not answer."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field

import httpx

from erpilot_platform.embedded import EmbeddedNatsCluster

# One product per cycle worker: concurrent adjustments of one product would refuse each other (stock_changed).
SKUS = ("SKU-PAPER-A4", "SKU-PAPER-A3", "SKU-PEN-BLUE", "SKU-COFFEE-1KG")


class Client:
    """One person's HTTP client on every gateway replica: a request that finds no gateway tries the next."""

    def __init__(self, urls: list[str], token: str):
        self.urls = itertools.cycle(urls)
        self.count = len(urls)
        self.client = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def send(self, method: str, path: str, body: dict | None = None, *, retry: bool = True) -> httpx.Response | None:
        """The response, or None when no gateway answered (``retry=False``: after the first transport error,
        for requests that must not be sent twice)."""
        for _ in range(3 * self.count if retry else 1):
            try:
                return self.client.request(method, next(self.urls) + path, json=body)
            except httpx.TransportError:
                time.sleep(0.2)
        return None


@dataclass
class Cycle:
    session_id: str
    started: float
    ended: float = 0.0
    call_id: str | None = None
    request_status: int | None = None  # None: no gateway answered the request
    outcome: str = "pending"  # committed | failed (a clear error) | lost (2xx, then never finished)
    finished: bool = False  # the call was seen `finished` (so its `tool_finished` event must be stored)
    error: str = ""


@dataclass
class Load:
    """``cycle_workers`` sessions doing approval cycles back to back, ``read_workers`` doing reads."""

    urls: list[str]
    requester_token: str
    manager_token: str
    cycle_workers: int = 2
    read_workers: int = 1
    finish_timeout: float = 60.0
    cycles: list[Cycle] = field(default_factory=list)
    reads: list[tuple[float, bool]] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for _ in range(self.cycle_workers):
            requester = Client(self.urls, self.requester_token)
            response = requester.send("POST", "/v1/sessions", {})
            assert response is not None and response.status_code == 201, response
            self.sessions.append(response.json()["session_id"])
        self._threads = [threading.Thread(target=self._cycles, args=(sid, SKUS[i % len(SKUS)]), daemon=True)
                         for i, sid in enumerate(self.sessions)]
        self._threads += [threading.Thread(target=self._reads, daemon=True) for _ in range(self.read_workers)]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.finish_timeout + 60)

    def _cycles(self, session_id: str, sku: str) -> None:
        requester, manager = Client(self.urls, self.requester_token), Client(self.urls, self.manager_token)
        while not self._stop.is_set():
            cycle = Cycle(session_id, time.monotonic())
            self.cycles.append(cycle)
            run_cycle(cycle, requester, manager, sku, self.finish_timeout)
            cycle.ended = time.monotonic()

    def _reads(self) -> None:
        reader = Client(self.urls, self.requester_token)
        response = reader.send("POST", "/v1/sessions", {})
        session_id = response.json()["session_id"] if response is not None and response.status_code == 201 else None
        while not self._stop.is_set() and session_id:
            answer = reader.send("POST", f"/v1/sessions/{session_id}/tool-calls",
                                 {"tool": "get_product", "arguments": {"sku": SKUS[0]}}, retry=False)
            self.reads.append((time.monotonic(), answer is not None and answer.status_code == 200))
            time.sleep(0.05)

    def recovery_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` to the end of the first committed cycle that started after it."""
        ends = [c.ended for c in self.cycles if c.started >= moment and c.outcome == "committed" and c.ended]
        return min(ends) - moment if ends else None

    def wait_recovered(self, moment: float, timeout: float = 60.0) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (seconds := self.recovery_after(moment)) is not None:
                return seconds
            time.sleep(0.1)
        return None


class EventWatcher(threading.Thread):
    """A person keeping a session's SSE stream open through the failures, as a browser's EventSource does:
    when the stream drops (its gateway died), it reconnects to the next gateway with ``Last-Event-ID`` set to
    the last ``seq`` it got. A stream that stays open but goes silent is not reopened: the gateway's bridge
    must carry on by itself across NATS node failures."""

    def __init__(self, urls: list[str], token: str, session_id: str, first_url: int = 0):
        super().__init__(daemon=True)
        self.urls, self.token, self.session_id = urls, token, session_id
        self.next_url = first_url
        self.events: list[dict] = []
        self.connections = 0
        self._stop = threading.Event()

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        # The read timeout is well above the bridge's 15 s keep-alive: only a dead connection trips it.
        with httpx.Client(headers=headers, timeout=httpx.Timeout(5, read=40)) as client:
            while not self._stop.is_set():
                url = self.urls[self.next_url % len(self.urls)]
                self.next_url += 1
                resume = {"Last-Event-ID": str(self.events[-1]["seq"])} if self.events else {}
                try:
                    with client.stream("GET", f"{url}/v1/sessions/{self.session_id}/events", headers=resume) as resp:
                        if resp.status_code != 200:
                            time.sleep(0.2)
                            continue
                        self.connections += 1
                        self._read(resp)
                except httpx.HTTPError:
                    time.sleep(0.2)

    def _read(self, response: httpx.Response) -> None:
        data = None
        for line in response.iter_lines():
            if self._stop.is_set():
                return
            if line.startswith("data:"):
                data = line.partition(":")[2].strip()
            elif line == "" and data is not None:
                self.events.append(json.loads(data))
                data = None

    def last_seq(self) -> int:
        return self.events[-1]["seq"] if self.events else 0

    def stop(self) -> None:
        self._stop.set()


def stored_events(database_url: str, session_id: str) -> list[dict]:
    """Every event of the session as the agent stores it (the one store of session events), in seq order."""
    from tests.e2e.test_duplicate_delivery import sql

    return [{"seq": row["seq"], "type": row["type"], "data": json.loads(row["data"])} for row in sql(
        database_url, "select seq, type, data from agent.session_events where session_id = $1 order by seq",
        session_id)]


def until_true(check, timeout: float) -> bool:
    """Poll ``check`` until it holds (True) or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def reelection_seconds(cluster: EmbeddedNatsCluster, index: int, killed_at: float, led: set[str],
                       timeout: float = 30.0) -> float | None:
    """Seconds from the kill of node ``index`` until each raft group it led has a new leader (NATS' own
    failover, which no client setting shortens), or None after ``timeout``."""
    dead, pending = cluster.names[index], set(led)
    while pending and time.monotonic() - killed_at < timeout:
        for i in range(len(cluster.nodes)):
            seen = cluster.leaders(i)
            # Survivors name the dead leader until an election; the restarted node names only a new one.
            pending -= {g for g in pending if seen.get(g) and (seen[g] != dead or i == index)}
        if pending:
            time.sleep(0.05)
    return None if pending else time.monotonic() - killed_at


def run_cycle(cycle: Cycle, requester: Client, manager: Client, sku: str, finish_timeout: float) -> None:
    sid = cycle.session_id
    # Not retried: a request whose answer was lost may have been accepted (the ledger check counts it).
    response = requester.send("POST", f"/v1/sessions/{sid}/tool-calls", {
        "tool": "adjust_stock", "arguments": {"sku": sku, "delta": 1, "reason": "cluster load"}}, retry=False)
    if response is None or response.status_code != 202:
        cycle.request_status = None if response is None else response.status_code
        cycle.outcome, cycle.error = "failed", "no gateway answered" if response is None else response.text[:200]
        return
    cycle.request_status, pending = 202, response.json()
    cycle.call_id = pending["call_id"]
    decided = False
    deadline = time.monotonic() + finish_timeout
    while time.monotonic() < deadline and "pending_id" not in pending:
        # A 202 while the write is still being prepared (its approval_pending did not reach the gateway in time,
        # e.g. across an election): look at the call until it awaits its approval, as a client would.
        time.sleep(0.2)
        view = requester.send("GET", f"/v1/sessions/{sid}/tool-calls/{cycle.call_id}")
        if view is not None and view.status_code == 200 and view.json().get("pending_id"):
            pending = view.json()
    if "pending_id" not in pending:
        cycle.outcome, cycle.error = "failed", "its approval was never recorded in time"
        return
    decision = {"action": "approve", "fingerprint": pending["fingerprint"]}
    while time.monotonic() < deadline:
        if not decided:  # as a person would, until some gateway answers: a decision is never applied twice
            answer = manager.send("POST", f"/v1/approvals/{pending['pending_id']}/decision", decision)
            decided = answer is not None and answer.status_code < 500
        view = requester.send("GET", f"/v1/sessions/{sid}/tool-calls/{cycle.call_id}")
        if view is not None and view.status_code == 200 and view.json()["status"] == "finished":
            body = view.json()
            cycle.finished = True
            cycle.outcome = "committed" if body["outcome"] == "succeeded" else "failed"
            cycle.error = "" if cycle.outcome == "committed" else str(body.get("error"))[:200]
            return
        time.sleep(0.2)
    # Never finished: lost, unless no gateway accepted the decision in all that time (a clear failure; the call
    # still awaits its decision, so nothing may commit).
    cycle.outcome, cycle.error = ("lost", "") if decided else ("failed", "the decision was not accepted")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")
