"""The ERP's tables, all in the ``erp`` schema. No other service reads them."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Sequence,
    String,
    Table,
    Text,
    func,
)

from erpilot_platform.inbox import inbox_table
from erpilot_platform.outbox import outbox_table

SCHEMA = "erp"
metadata = MetaData(schema=SCHEMA)

# Human-friendly ids (D-1001, O-1001, R-1001, CN-9101) come from sequences, so replicas never collide.
draft_numbers = Sequence("draft_numbers", start=1001, metadata=metadata)
order_numbers = Sequence("order_numbers", start=5101, metadata=metadata)
refund_numbers = Sequence("refund_numbers", start=7101, metadata=metadata)
ID_SEQUENCES = {"draft": (draft_numbers, "D"), "order": (order_numbers, "O"), "refund": (refund_numbers, "R")}
"""Each core id kind (``WriteTool.new_id_kind``, and drafts) with its sequence and prefix; a record kind a tool
brings registers its own (``adapters.records``, e.g. ``credit_note``)."""

customers = Table(
    "customers", metadata,
    Column("customer_id", String(64), primary_key=True),
    Column("name", Text, nullable=False),
    Column("discount_pct", Integer, nullable=False, server_default="0"),
    CheckConstraint("discount_pct BETWEEN 0 AND 100", name="discount_range"),
)

products = Table(
    "products", metadata,
    Column("sku", String(64), primary_key=True),
    Column("name", Text, nullable=False),
    Column("status", String(20), nullable=False),
    Column("price_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("on_hand", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("on_hand >= 0", name="stock_never_negative"),
    CheckConstraint("price_minor >= 0", name="price_not_negative"),
    CheckConstraint("status IN ('active', 'discontinued')", name="product_status"),
)

drafts = Table(
    "drafts", metadata,
    Column("draft_id", String(64), primary_key=True),
    Column("session_id", String(64), nullable=False, index=True),
    # The vouched sub of the requester who created it (domain.owners); NULL for drafts made before owners were
    # recorded (migration 0003), which are nobody's.
    Column("owner", String(200), nullable=True),
    Column("latest_revision", Integer, nullable=False),
    Column("status", String(20), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("status IN ('open', 'submitted')", name="draft_status"),
)

draft_revisions = Table(
    "draft_revisions", metadata,
    Column("draft_id", String(64), ForeignKey(f"{SCHEMA}.drafts.draft_id"), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("snapshot", JSON, nullable=False),
    Column("operation_id", String(100), nullable=True, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("draft_id", "revision"),
)

orders = Table(
    "orders", metadata,
    Column("order_id", String(64), primary_key=True),
    Column("customer_id", String(64), nullable=False),
    Column("customer_name", Text, nullable=False),
    Column("status", String(20), nullable=False),
    Column("lines", JSON, nullable=False),
    Column("total_amount_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("paid_minor", BigInteger, nullable=False),
    Column("refunded_minor", BigInteger, nullable=False, server_default="0"),
    Column("draft_id", String(64), nullable=True),
    Column("revision", Integer, nullable=True),
    Column("session_id", String(64), nullable=True),
    Column("owner", String(200), nullable=True),  # its draft's owner; NULL: the back office's history, or older
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("refunded_minor >= 0 AND refunded_minor <= paid_minor", name="refund_within_paid"),
)

refunds = Table(
    "refunds", metadata,
    Column("refund_id", String(64), primary_key=True),
    Column("order_id", String(64), ForeignKey(f"{SCHEMA}.orders.order_id"), nullable=False),
    Column("amount_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("channel", String(20), nullable=False),
    Column("remaining_minor", BigInteger, nullable=False),
    Column("operation_id", String(100), nullable=True, unique=True),  # None for seeded history
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

operations = Table(
    "operations", metadata,
    Column("operation_id", String(100), primary_key=True),
    Column("tool", String(64), nullable=False),
    Column("tool_schema_version", Integer, nullable=False, server_default="1"),
    Column("session_id", String(64), nullable=False),
    Column("call_id", String(100), nullable=False),
    Column("requested_by", String(200), nullable=False),
    # The gateway's requester assertion that vouched for requested_by, and when the ledger accepted it (an edit
    # keeps its version's): the approval service checks it again from the request this row is sent as.
    Column("assertion", Text, nullable=True),  # None only for operations prepared before assertions existed
    Column("asserted_at", DateTime(timezone=True), nullable=True),
    Column("supersedes", String(100), nullable=True),  # an edit: the operation this version replaces
    Column("arguments", JSON, nullable=False),
    Column("fingerprint", String(80), nullable=False),
    Column("facts", JSON, nullable=False),
    Column("preview", JSON, nullable=False),
    Column("status", String(20), nullable=False),
    Column("result", JSON, nullable=True),
    Column("error", JSON, nullable=True),
    Column("grant_pending_id", String(100), nullable=True),
    Column("decided_by", String(200), nullable=True),  # the grant's decided_by, recorded with the outcome
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("prepared_at", DateTime(timezone=True), nullable=True),
    Column("committed_at", DateTime(timezone=True), nullable=True),
    CheckConstraint("status IN ('prepared', 'committed', 'rejected')", name="operation_status"),
)
# At most one operation per call (edits aside, which supersede it): one call's assertion vouches for one write.
Index("uq_operations_call", operations.c.session_id, operations.c.call_id, unique=True,
      postgresql_where=operations.c.supersedes.is_(None))

consumed_grants = Table(
    "consumed_grants", metadata,
    Column("pending_id", String(100), primary_key=True),
    Column("operation_id", String(100), nullable=False, unique=True),
    Column("consumed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

outbox = outbox_table(metadata)
inbox = inbox_table(metadata)

# Last, once ``metadata`` and the tables a record kind may refer to exist: each record kind's module puts its table
# (and sequence) on ``metadata``, so whatever imports this module (Alembic's env.py, the schema test) sees them all.
from erpilot_erp.adapters import records  # noqa: E402,F401
