"""What `erpilot torture` crashes and what a run does: every row of docs/FAILPOINTS.md in every service it names
(each outbox owner at each outbox failpoint), and a run's workload drawn from its target and seed alone, so
`--seed S --runs 1` replays run S of any campaign."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from erpilot.torture.campaign import run_seed
from erpilot.torture.plan import plan
from erpilot.torture.targets import TableError, Target, parse, select, table_text, targets

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_every_row_of_the_failpoint_table_is_a_target_in_every_service_it_names():
    text = (ROOT / "docs/FAILPOINTS.md").read_text()
    rows = re.findall(r"^\| `([a-z_.]+)` \| ([^|]+) \|", text, re.M)
    found = targets()
    assert table_text() == text  # in a checkout, the campaign reads the documented table itself
    assert [(t.failpoint, t.service) for t in found] == [
        (name, service.strip()) for name, services in rows for service in services.split(",")]
    assert {t.failpoint for t in found} == {name for name, _ in rows}


def test_every_outbox_owner_is_crashed_at_every_outbox_failpoint():
    outbox = [t for t in targets() if t.failpoint.startswith("outbox.")]
    owners = {"erp", "approval", "agent"}  # every service with an outbox (the gateway has none)
    assert {(t.failpoint, t.service) for t in outbox} == {
        (failpoint, owner) for failpoint in ("outbox.before_publish", "outbox.after_publish") for owner in owners}
    assert {t.label for t in outbox} >= {"outbox.before_publish@approval", "outbox.after_publish@agent"}


def test_a_new_row_is_a_target_without_touching_the_campaign():
    table = "| name | service |\n|---|---|\n| `erp.new.point` | erp | … |\n| `outbox.x` | agent, erp | … |\n"
    assert parse(table) == [Target("erp.new.point", "erp"), Target("outbox.x", "agent", shared=True),
                            Target("outbox.x", "erp", shared=True)]


@pytest.mark.parametrize("cell", ["every service", "erp, billing", " "])
def test_a_service_column_the_campaign_cannot_arm_is_an_error(cell):
    with pytest.raises(TableError, match="must list services from"):
        parse(f"| `erp.x` | {cell} | … |\n")


def test_failpoint_selection_by_name_or_by_name_and_service():
    available = targets()
    assert [t.label for t in select(available, ["outbox.before_publish"])] == [
        "outbox.before_publish@erp", "outbox.before_publish@approval", "outbox.before_publish@agent"]
    assert [t.label for t in select(available, ["outbox.before_publish@approval"])] == [
        "outbox.before_publish@approval"]
    assert select(available, None) == available
    with pytest.raises(TableError, match="unknown failpoint 'erp.nope'"):
        select(available, ["erp.nope"])


def test_a_runs_workload_is_drawn_from_its_target_and_seed_alone():
    """Run k of a campaign started at seed S has seed S+k; its plan depends on nothing else (no ledger state, no
    earlier run), so the replay line `--failpoint F --seed S+k --runs 1` does exactly what run k did."""
    label, campaign_seed, k = "outbox.before_publish@approval", 1000, 2
    in_campaign = plan(label, run_seed(campaign_seed, k))
    replayed = plan(label, run_seed(campaign_seed + k, 0))
    assert in_campaign == replayed
    assert plan(label, 1001) != plan(label, 1002) and plan("erp.commit.after_db_commit", 1001) != plan(label, 1001)
    kinds = [(a.kind, a.intent) for a in in_campaign.actions]
    assert ("order", "approve") in kinds and ("adjust", "edit") in kinds  # every run passes the write's points
    assert len(in_campaign.orders) == sum(a.kind in ("cancel", "refund") for a in in_campaign.actions)


def test_a_plan_is_the_same_in_another_process():
    """Nothing in it hangs on the process: not on hash randomization, not on the order coroutines run in."""
    code = "from erpilot.torture.plan import plan; print(repr(plan('agent.commit.after_send', 77)))"
    others = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert others == {repr(plan("agent.commit.after_send", 77)) + "\n"}
