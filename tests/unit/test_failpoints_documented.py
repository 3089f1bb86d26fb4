"""Every failpoint in the code is documented in docs/FAILPOINTS.md and in the crash campaign's table of
docs/GUARANTEES.md, and nothing documented there is gone from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
TABLE_ROW = re.compile(r"^\| `([a-z_.]+)` \|", re.M)


def failpoints_in_code() -> set[str]:
    found = set()
    for path in [*ROOT.glob("services/*/src/**/*.py"), *ROOT.glob("libs/*/src/**/*.py")]:
        found |= set(re.findall(r'failpoint\("([a-z_.]+)"\)', path.read_text()))
    return found


def section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next ``## ``."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_failpoints_in_code_and_docs_agree():
    in_code = failpoints_in_code()
    documented = set(TABLE_ROW.findall((ROOT / "docs/FAILPOINTS.md").read_text()))
    assert {"erp.commit.after_db_commit", "approval.decide.after_db_commit", "agent.commit.after_send"} <= in_code
    assert in_code == documented


def test_the_crash_campaign_table_in_guarantees_names_exactly_the_failpoints_in_the_code():
    campaign = section((ROOT / "docs/GUARANTEES.md").read_text(), "Crash campaign (`erpilot torture`)")
    assert set(TABLE_ROW.findall(campaign)) == failpoints_in_code()
