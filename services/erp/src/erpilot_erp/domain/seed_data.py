"""The demo catalog loaded once by ``erpilot up`` / ``erpilot seed``: pure data with stable ids.

Customers C-1001…, products SKU-… (all EUR), historical orders O-5001…, refunds R-7001….
"""

from __future__ import annotations

from datetime import UTC, datetime

from erpilot_erp.domain.model import Customer, Order, OrderLine, Product, Refund
from erpilot_erp.domain.pricing import line_total_minor, total_minor

CURRENCY = "EUR"
DISCOUNTED_CUSTOMER_ID = "C-1003"
ZERO_STOCK_SKU = "SKU-TONER-26X"
REFUNDABLE_ORDER_ID = "O-5001"

SEED_CUSTOMERS: tuple[Customer, ...] = (
    Customer("C-1001", "Nordwind Logistik GmbH & Co. KG", 0),
    Customer("C-1002", "Bäckerei Hoffmann und Söhne OHG", 0),
    Customer("C-1003", "Lindqvist & Partner Architekten AB", 10),
    Customer("C-1004", "Meridian Consulting Partners Ltd.", 0),
    Customer("C-1005", "Stadtwerke Kleinfeld GmbH", 0),
    Customer("C-1006", "Dr. Amelie Brandt Zahnarztpraxis", 0),
)


def _active(sku: str, name: str, price_minor: int, on_hand: int) -> Product:
    return Product(sku, name, "active", price_minor, CURRENCY, on_hand)


def _discontinued(sku: str, name: str, price_minor: int, on_hand: int) -> Product:
    return Product(sku, name, "discontinued", price_minor, CURRENCY, on_hand)


SEED_PRODUCTS: tuple[Product, ...] = (
    _active("SKU-PAPER-A4", "Copy paper A4 80 g/m², 500 sheets", 549, 420),
    _active("SKU-PAPER-A3", "Copy paper A3 80 g/m², 500 sheets", 1199, 60),
    _active("SKU-PEN-BLUE", "Ballpoint pen blue, box of 50", 1450, 85),
    _active("SKU-MARKER-SET", "Whiteboard marker set, 4 colours", 799, 140),
    _active("SKU-STAPLER", "Heavy-duty stapler, 100 sheets", 3490, 25),
    _active("SKU-STAPLES", "Staples 24/6, box of 5000", 299, 300),
    _active("SKU-BINDER-A4", "Lever arch file A4, 80 mm spine", 379, 250),
    _active("SKU-NOTEBOOK-A5", "Notebook A5 dotted, 96 sheets", 649, 180),
    _active("SKU-TONER-26A", "Toner cartridge 26A black", 8990, 18),
    _active(ZERO_STOCK_SKU, "Toner cartridge 26X black, high yield", 14990, 0),
    _active("SKU-PRINTER-M404", "Laser printer mono M404dn, duplex", 32900, 7),
    _active("SKU-MONITOR-27", "Monitor 27\" QHD IPS, height-adjustable", 28900, 14),
    _active("SKU-MONITOR-24", "Monitor 24\" Full HD IPS", 14900, 22),
    _active("SKU-DOCK-USBC", "USB-C docking station, 100 W", 18900, 16),
    _active("SKU-KEYBOARD-DE", "Wireless keyboard, German layout", 4990, 40),
    _active("SKU-MOUSE-ERGO", "Wireless ergonomic mouse", 2990, 55),
    _active("SKU-HEADSET-USB", "USB headset with noise-cancelling microphone", 6990, 30),
    _active("SKU-WEBCAM-FHD", "Full HD webcam with privacy shutter", 5990, 12),
    _active("SKU-LAPTOP-14", "Laptop 14\", 16 GB RAM, 512 GB SSD", 109900, 5),
    _active("SKU-SSD-1TB", "External SSD 1 TB, USB-C", 10990, 20),
    _active("SKU-CABLE-HDMI-2M", "HDMI cable 2 m", 999, 200),
    _active("SKU-CHAIR-MESH", "Ergonomic office chair, mesh back", 34900, 9),
    _active("SKU-DESK-SITSTAND", "Electric sit-stand desk 160 x 80 cm", 59900, 4),
    _active("SKU-LAMP-LED", "LED desk lamp, dimmable", 3990, 35),
    _active("SKU-SHREDDER-P4", "Cross-cut paper shredder, security level P-4", 12900, 6),
    _active("SKU-WHITEBOARD-120", "Magnetic whiteboard 120 x 90 cm", 8900, 8),
    _active("SKU-COFFEE-1KG", "Espresso coffee beans, 1 kg", 1890, 75),
    _discontinued("SKU-FAX-T100", "Fax machine T-100", 19900, 3),
    _discontinued("SKU-CDR-50", "CD-R 700 MB, spindle of 50", 1590, 40),
    _discontinued("SKU-PHONE-DECT", "DECT cordless desk phone", 4990, 11),
)

_PRODUCTS = {p.sku: p for p in SEED_PRODUCTS}
_CUSTOMERS = {c.customer_id: c for c in SEED_CUSTOMERS}


def _order(
    order_id: str, customer_id: str, lines: list[tuple[str, int]], created_at: datetime, *,
    status: str = "placed", refunded_minor: int = 0,
) -> Order:
    """A historical order priced like a real one: list price, the customer's discount, payment captured."""
    customer = _CUSTOMERS[customer_id]
    order_lines = tuple(
        OrderLine(
            sku=sku,
            name=_PRODUCTS[sku].name,
            qty=qty,
            unit_price_minor=_PRODUCTS[sku].price_minor,
            line_total_minor=line_total_minor(qty, _PRODUCTS[sku].price_minor, customer.discount_pct),
        )
        for sku, qty in lines
    )
    total = total_minor(line.line_total_minor for line in order_lines)
    return Order(
        order_id=order_id,
        customer_id=customer_id,
        customer_name=customer.name,
        status="cancelled" if status == "cancelled" else "placed",
        lines=order_lines,
        total_amount_minor=total,
        currency=CURRENCY,
        paid_minor=total,
        refunded_minor=refunded_minor,
        created_at=created_at,
    )


SEED_ORDERS: tuple[Order, ...] = (
    # Placed, paid, nothing refunded yet: the demo's refundable order.
    _order(REFUNDABLE_ORDER_ID, "C-1001", [("SKU-PAPER-A4", 20), ("SKU-TONER-26A", 2)],
           datetime(2026, 9, 1, 9, 30, tzinfo=UTC)),
    # The discounted customer, partly refunded already (see SEED_REFUNDS).
    _order("O-5002", DISCOUNTED_CUSTOMER_ID, [("SKU-MONITOR-27", 2), ("SKU-DOCK-USBC", 2)],
           datetime(2026, 9, 8, 14, 5, tzinfo=UTC), refunded_minor=17010),
    # Cancelled (stock returned, payment kept: cancelling never refunds).
    _order("O-5003", "C-1002", [("SKU-COFFEE-1KG", 6)], datetime(2026, 9, 15, 7, 45, tzinfo=UTC),
           status="cancelled"),
    _order("O-5004", "C-1004", [("SKU-LAPTOP-14", 1), ("SKU-HEADSET-USB", 1), ("SKU-MOUSE-ERGO", 1)],
           datetime(2026, 9, 22, 11, 0, tzinfo=UTC)),
)

SEED_REFUNDS: tuple[Refund, ...] = (
    # One dock returned by C-1003: 18900 less its 10% discount = 17010.
    Refund("R-7001", "O-5002", 17010, CURRENCY, "original", SEED_ORDERS[1].total_amount_minor - 17010,
           datetime(2026, 9, 12, 10, 0, tzinfo=UTC)),
)
