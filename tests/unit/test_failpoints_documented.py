"""Every failpoint in the code is documented in docs/FAILPOINTS.md (and nothing documented is gone)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_failpoints_in_code_and_docs_agree():
    in_code = set()
    for path in [*ROOT.glob("services/*/src/**/*.py"), *ROOT.glob("libs/*/src/**/*.py")]:
        in_code |= set(re.findall(r'failpoint\("([a-z_.]+)"\)', path.read_text()))
    documented = set(re.findall(r"^\| `([a-z_.]+)` \|", (ROOT / "docs/FAILPOINTS.md").read_text(), re.M))
    assert {"erp.commit.after_db_commit", "approval.decide.after_db_commit", "agent.commit.after_send"} <= in_code
    assert in_code == documented
