"""Loads the demo catalog (domain.seed_data) once; running it again changes nothing."""

from __future__ import annotations

from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from erpilot_erp.adapters.tables import customers, orders, products, refunds
from erpilot_erp.domain import seed_data


async def load_demo_catalog(engine: AsyncEngine) -> dict[str, int]:
    """Insert whatever of the demo catalog is missing; returns how many rows were new per table."""
    rows = {
        customers: [{"customer_id": c.customer_id, "name": c.name, "discount_pct": c.discount_pct}
                    for c in seed_data.SEED_CUSTOMERS],
        products: [{"sku": p.sku, "name": p.name, "status": p.status, "price_minor": p.price_minor,
                    "currency": p.currency, "on_hand": p.on_hand} for p in seed_data.SEED_PRODUCTS],
        orders: [{"order_id": o.order_id, "customer_id": o.customer_id, "customer_name": o.customer_name,
                  "status": o.status, "lines": [line.to_result() for line in o.lines],
                  "total_amount_minor": o.total_amount_minor, "currency": o.currency, "paid_minor": o.paid_minor,
                  "refunded_minor": o.refunded_minor, "created_at": o.created_at} for o in seed_data.SEED_ORDERS],
        refunds: [{"refund_id": r.refund_id, "order_id": r.order_id, "amount_minor": r.amount_minor,
                   "currency": r.currency, "channel": r.channel, "remaining_minor": r.remaining_minor,
                   "created_at": r.created_at} for r in seed_data.SEED_REFUNDS],
    }
    inserted: dict[str, int] = {}
    async with engine.begin() as conn:
        for table, values in rows.items():
            if not values:
                continue
            result = await conn.execute(insert(table).values(values).on_conflict_do_nothing()
                                        .returning(table.primary_key.columns.values()[0]))
            inserted[table.name] = len(result.all())
    return inserted
