"""Every write tool's effects, row sets and id kinds have their SQL: an applier per effect type, a loader per row
set and a sequence per id kind, registered by the adapter modules (``adapters.records``) when imported. A tool that
brings a record kind and forgets its adapter module (or one entry of it) fails here, not on its first commit."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import erpilot_erp.domain
from erpilot_erp.adapters import records
from erpilot_erp.adapters.ledger import _ID_SEQUENCES
from erpilot_erp.adapters.tables import metadata
from erpilot_erp.domain.operations import NEW_ID_KIND, WRITE_TOOLS
from erpilot_erp.domain.plans import Effect, Rows

pytestmark = pytest.mark.unit


def _effect_types() -> set[type[Effect]]:
    """Every concrete effect the domain defines (the core's in ``plans`` and each tool's in its module)."""
    for info in pkgutil.iter_modules(erpilot_erp.domain.__path__):
        importlib.import_module(f"{erpilot_erp.domain.__name__}.{info.name}")
    found: set[type[Effect]] = set()
    pending = list(Effect.__subclasses__())
    while pending:
        kind = pending.pop()
        found.add(kind)
        pending.extend(kind.__subclasses__())
    return found


def test_every_effect_type_has_an_applier():
    effects = _effect_types()
    assert {kind.__name__ for kind in effects} >= {"StockChange", "NewOrder", "OrderChange", "DraftSubmission",
                                                    "NewRefund", "NewCreditNote"}
    assert {kind.__name__ for kind in effects - set(records.APPLIERS)} == set()


def test_every_row_set_a_tool_declares_has_a_loader():
    declared = {kind for tool in WRITE_TOOLS.values() for kind in tool.rows if kind.of_order}
    assert Rows.ORDER_CREDIT_NOTES in declared
    assert {kind for kind in Rows if kind.of_order} - set(records.ROW_SETS) == set()


def test_every_id_kind_has_its_sequence_and_every_record_table_is_on_the_metadata():
    assert set(NEW_ID_KIND.values()) | {"draft"} <= set(_ID_SEQUENCES)
    assert f"{metadata.schema}.credit_notes" in metadata.tables  # what Alembic's env.py and the schema test see
    assert all(sequence.metadata is metadata for sequence, _ in _ID_SEQUENCES.values())


def test_a_second_registration_of_one_effect_is_refused():
    [credit_note_effect] = [kind for kind in records.APPLIERS if kind.__name__ == "NewCreditNote"]

    async def another(conn, effect, operation_id):  # pragma: no cover - never called
        raise AssertionError

    try:
        records.applies(credit_note_effect)(another)
    except RuntimeError as exc:
        assert "registered twice" in str(exc)
    else:
        raise AssertionError("a second applier of NewCreditNote was accepted")
    assert records.APPLIERS[credit_note_effect] is not another


def test_the_tables_module_alone_puts_every_record_kinds_table_on_the_metadata():
    """Alembic's env.py imports ``adapters.tables`` and nothing else; in a fresh interpreter that must already see
    every table (the test process imported the whole service, which would hide a record module left out)."""
    import subprocess
    import sys

    fresh = subprocess.run(
        [sys.executable, "-c", "import erpilot_erp.adapters.tables as t; print(*sorted(t.metadata.tables))"],
        capture_output=True, text=True, check=True)
    assert fresh.stdout.split() == sorted(metadata.tables)
