"""The repository cases (``tests/repository_cases.py``) on the memory fakes; ``integration/test_repositories.py``
runs the same cases on PostgreSQL too."""

from __future__ import annotations

import pytest

from erpilot_platform.uow import ReadOnly

from ..fakes import MemoryApprovals
from ..repository_cases import *  # noqa: F403 (the shared cases are collected here)
from ..repository_cases import Units, pending

pytestmark = pytest.mark.unit


@pytest.fixture
def units() -> Units:
    uow = MemoryApprovals()

    async def emitted() -> list[tuple[str, str]]:
        return [(sent.subject, sent.msg_id or "fresh") for sent in uow.sent]

    return Units(uow=uow, key=uow.key, emitted=emitted)


async def test_a_read_unit_of_work_may_change_nothing(units: Units) -> None:
    # The SQL ``read`` runs each statement on its own: a write there would commit. The fakes refuse it.
    with pytest.raises(ReadOnly):
        await units.uow.read(lambda unit: unit.approvals.insert_new(pending(units.uow.time)))
