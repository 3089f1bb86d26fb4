"""Every advisory lock key is declared once, and no two uses share one (issue 13: a shared key stalled the agent)."""

import re
from pathlib import Path

import pytest

from erpilot_platform import advisory_locks

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[4]


def test_every_key_is_distinct():
    keys = list(advisory_locks.KEYS.values())
    assert len(set(keys)) == len(keys)
    namespaces = list(advisory_locks.NAMESPACES.values())
    assert len(set(namespaces)) == len(namespaces)


def test_no_source_declares_a_key_of_its_own():
    # A literal key next to the lock call is how the collision came about: keys come from advisory_locks.
    literal = re.compile(r"(LOCK_KEY|LOCK_NAMESPACE|lock_key)\s*=\s*[0-9_]{4,}")
    sources = [path for top in ("services", "libs", "src") for path in (ROOT / top).rglob("*.py")]
    assert any(path.name == "advisory_locks.py" for path in sources)  # the scan looked at the real tree
    offenders = [str(path.relative_to(ROOT)) for path in sources
                 if path.name != "advisory_locks.py" and literal.search(path.read_text())]
    assert offenders == []
