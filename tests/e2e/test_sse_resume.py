"""SSE resume (SPEC §4, §5): a connection dropped in the middle of a run, reopened with `Last-Event-ID`,
continues exactly after the last event it saw, with no gap and no repeat, until the run ends. A stream
ends when the token that opened it expires."""

from __future__ import annotations

import time
from datetime import timedelta

import httpx
import jwt
import pytest

from erpilot.stack.tokens import make_token
from tests.e2e.conftest import SECRET, Api
from tests.e2e.test_model_runs import start_run

pytestmark = pytest.mark.e2e


def test_a_dropped_stream_resumes_after_its_last_event_id_mid_run(requester: Api, approver: Api):
    session_id = requester.new_session()
    draft_run = start_run(requester, session_id, "draft for C-1001: SKU-PEN-BLUE x1")
    requester.events(session_id, until=lambda evs: any(e["type"] == "run_finished" and e["data"]["run_id"] == draft_run
                                                       for e in evs))
    submit_run = start_run(requester, session_id, "submit")

    # First connection: read until the run waits for its approval, then drop the connection mid-run.
    first = requester.events(session_id, until=lambda evs: any(e["type"] == "approval_pending" for e in evs))
    [pending] = [e["data"] for e in first if e["type"] == "approval_pending"]
    assert not any(e["type"] in ("run_finished", "run_failed") and e["data"]["run_id"] == submit_run for e in first)
    last_seen = first[-1]["seq"]

    # While nobody listens, the run goes on: the approval, the commit, the answer, the end of the run.
    decision = approver.post(f"/v1/approvals/{pending['pending_id']}/decision",
                             {"action": "approve", "fingerprint": pending["fingerprint"]})
    assert decision.status_code == 200, decision.text

    resumed = requester.events(session_id, last_event_id=last_seen, until=lambda evs: any(
        e["type"] == "run_finished" and e["data"]["run_id"] == submit_run for e in evs), timeout=45)
    assert resumed[0]["seq"] == last_seen + 1  # nothing seen twice
    seqs = [e["seq"] for e in first + resumed]
    assert seqs == list(range(1, len(seqs) + 1))  # and nothing missed
    types = [e["type"] for e in resumed]
    assert "approval_resolved" in types and "tool_finished" in types and types[-1] == "run_finished"
    call_id = pending["call_id"]
    finished = [e["data"] for e in resumed if e["type"] == "tool_finished" and e["data"]["call_id"] == call_id]
    assert [f["outcome"] for f in finished] == ["succeeded"]

    # A resume from the very last event waits for new events instead of replaying: the next one is new.
    tail = resumed[-1]["seq"]
    after = start_run(requester, session_id, "help")
    more = requester.events(session_id, last_event_id=tail, until=lambda evs: any(
        e["type"] == "run_finished" and e["data"]["run_id"] == after for e in evs))
    assert more[0]["seq"] == tail + 1
    assert (more[0]["type"], more[0]["data"]["role"], more[0]["data"]["text"]) == ("message", "user", "help")


def test_the_stream_of_a_session_not_yours_or_unknown_is_404(requester: Api, stack):
    session_id = requester.new_session()
    stranger = Api(stack.base_url, "req-stranger", "requester")
    for api, sid in ((stranger, session_id), (requester, "ses_does_not_exist")):
        with api.client.stream("GET", f"/v1/sessions/{sid}/events") as response:
            assert response.status_code == 404 and response.headers["content-type"].startswith(
                "application/problem+json"), response.read()


def test_a_stream_closes_when_the_token_that_opened_it_expires(requester: Api, stack):
    session_id = requester.new_session()
    run_id = start_run(requester, session_id, "help")
    requester.events(session_id, until=lambda evs: any(e["type"] == "run_finished" for e in evs))
    short = make_token(SECRET, requester.sub, ["requester"], timedelta(seconds=4))
    expires = jwt.decode(short, options={"verify_signature": False})["exp"]

    seen = []
    with httpx.Client(base_url=stack.base_url, timeout=httpx.Timeout(5, read=20)) as http, http.stream(
            "GET", f"/v1/sessions/{session_id}/events", headers={"Authorization": f"Bearer {short}"}) as response:
        assert response.status_code == 200
        for line in response.iter_lines():  # ends when the server closes the stream
            seen.append(line)
            # Keep-alive pings come every 15 s: a stream still open then has outlived its token.
            assert time.time() < expires + 10, "the stream outlived its token"
    closed = time.time()
    assert expires - 0.5 <= closed < expires + 3
    assert f'"run_id": "{run_id}"' in "\n".join(seen)  # the events came while the token was valid
