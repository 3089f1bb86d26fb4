"""ERP settings (``ERPILOT_*``)."""

from __future__ import annotations

from typing import Literal

from erpilot_platform.settings import PlatformSettings


class ErpSettings(PlatformSettings):
    grant_verify_key: str | None = None
    quote_ttl_seconds: int = 24 * 3600
    stock_check: Literal["exact", "sufficient"] = "exact"
