"""ERP settings (``ERPILOT_*``) and the keys it verifies with."""

from __future__ import annotations

from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from erpilot_platform.assertions import ASSERTION_KEYS_HINT, VERIFY_KEY_ENV
from erpilot_platform.grants import GRANT_KEYS_HINT
from erpilot_platform.settings import PlatformSettings, verify_key_setting


class ErpSettings(PlatformSettings):
    grant_verify_key: str | None = None
    assertion_verify_key: str | None = None
    quote_ttl_seconds: int = 24 * 3600
    stock_check: Literal["exact", "sufficient"] = "exact"

    def grant_key(self) -> Ed25519PublicKey:
        """ERPILOT_GRANT_VERIFY_KEY; only in dev mode, else the public half of the key pair under ERPILOT_DATA_DIR."""
        return verify_key_setting(self.grant_verify_key, variable="ERPILOT_GRANT_VERIFY_KEY", hint=GRANT_KEYS_HINT,
                                  stem="grant", dev_mode=self.dev_mode, data_dir=self.data_dir)

    def assertion_key(self) -> Ed25519PublicKey:
        """ERPILOT_ASSERTION_VERIFY_KEY (the gateway's requester assertions); only in dev mode, else the public half
        of the assertion key pair under ERPILOT_DATA_DIR."""
        return verify_key_setting(self.assertion_verify_key, variable=VERIFY_KEY_ENV, hint=ASSERTION_KEYS_HINT,
                                  stem="assertion", dev_mode=self.dev_mode, data_dir=self.data_dir)
