"""ERP settings (``ERPILOT_*``): the keys it verifies with, and the ledger key it signs its approval requests with."""

from __future__ import annotations

from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import Field

from erpilot_platform.assertions import ASSERTION_KEYS_HINT, VERIFY_KEY_ENV
from erpilot_platform.grants import GRANT_KEYS_HINT
from erpilot_platform.ledger_signatures import LEDGER_KEYS_HINT
from erpilot_platform.ledger_signatures import SIGNING_KEY_ENV as LEDGER_SIGNING_KEY_ENV
from erpilot_platform.settings import PlatformSettings, signing_key_setting, verify_key_setting


class ErpSettings(PlatformSettings):
    grant_verify_key: str | None = None
    assertion_verify_key: str | None = None
    ledger_signing_key: str | None = Field(
        None, description="Base64 raw Ed25519 key the ERP signs its approval requests with; unset: only in dev mode, "
                          "the service's development key file (keys/erp).")
    quote_ttl_seconds: int = 24 * 3600
    stock_check: Literal["exact", "sufficient"] = "exact"

    def grant_key(self) -> Ed25519PublicKey:
        """ERPILOT_GRANT_VERIFY_KEY; only in dev mode, else the ERP's development copy of the grant pair's public
        key (``$ERPILOT_DATA_DIR/keys/erp/``, ``erpilot_platform.dev_keys``)."""
        return verify_key_setting(self.grant_verify_key, variable="ERPILOT_GRANT_VERIFY_KEY", hint=GRANT_KEYS_HINT,
                                  stem="grant", service="erp", dev_mode=self.dev_mode, data_dir=self.data_dir)

    def assertion_key(self) -> Ed25519PublicKey:
        """ERPILOT_ASSERTION_VERIFY_KEY (the gateway's requester assertions); only in dev mode, else the ERP's
        development copy of the assertion pair's public key (``$ERPILOT_DATA_DIR/keys/erp/``)."""
        return verify_key_setting(self.assertion_verify_key, variable=VERIFY_KEY_ENV, hint=ASSERTION_KEYS_HINT,
                                  stem="assertion", service="erp", dev_mode=self.dev_mode, data_dir=self.data_dir)

    def ledger_key(self) -> Ed25519PrivateKey:
        """ERPILOT_LEDGER_SIGNING_KEY (signs every ``cmd.approval.request`` the ERP outboxes); only in dev mode, else
        the ERP's development key file (``$ERPILOT_DATA_DIR/keys/erp/``; created once, kept, so a request still in
        the outbox at a restart verifies after it). Outside dev mode a missing key stops start-up: only the ERP may
        hold it, and a replica with another data directory would sign with another key."""
        return signing_key_setting(self.ledger_signing_key, variable=LEDGER_SIGNING_KEY_ENV, hint=LEDGER_KEYS_HINT,
                                   stem="ledger", dev_mode=self.dev_mode, data_dir=self.data_dir)
