"""What standing approvals may approve of one chat run (security follow-up of issues #32 and #34).

A chat run's assertion (purpose ``run``, an hour) covers every call ``<run_id>:*``, and the agent that holds it runs
the model and is trusted least: each call id it makes up is one more operation the ledger prepares, and a standing
approval would approve each at once. So a run's writes are approved by standing approvals only

- **until the run ended**: once its owner cancelled it (the gateway says so, ``cmd.approval.end_run``, or the
  agent's record of the cancel with the gateway's cancel assertion), a call of that run waits for a person;
- **up to ``max_writes_per_run``** (the policy's ``[standing] max_writes_per_run``, default 5): further writes of
  the run wait for a person.

Neither refuses anything: the approval is stored and a person may still approve it. Direct tool calls are bound to
one call per assertion already and are not counted here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

DEFAULT_MAX_WRITES_PER_RUN = 5
RUN_ENDED = "run_ended"
RUN_LIMIT_REACHED = "run_limit_reached"


@dataclass(frozen=True)
class StandingRun:
    """One run's standing-approval ledger: writes approved so far, and when (and by whom) it ended."""

    session_id: str
    run_id: str
    approved: int = 0
    ended_at: datetime | None = None
    ended_by: str | None = None


def withheld(run: StandingRun, max_writes_per_run: int) -> str | None:
    """Why no standing approval may approve another write of ``run`` (``run_ended``, ``run_limit_reached``), or
    None when one may."""
    if run.ended_at is not None:
        return RUN_ENDED
    if run.approved >= max_writes_per_run:
        return RUN_LIMIT_REACHED
    return None


def counted(run: StandingRun) -> StandingRun:
    """``run`` after a standing approval voted for one more of its writes."""
    return replace(run, approved=run.approved + 1)


def end(run: StandingRun, by: str, now: datetime) -> StandingRun | None:
    """``run`` ended by ``by`` at ``now``; None when it ended already (the first end stands)."""
    if run.ended_at is not None:
        return None
    return replace(run, ended_at=now, ended_by=by)
