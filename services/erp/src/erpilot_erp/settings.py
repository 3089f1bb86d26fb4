"""ERP settings (``ERPILOT_*``): the keys it verifies with, and the ledger key it signs its approval requests with."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import Field

from erpilot_platform import dev_keys
from erpilot_platform.assertions import VERIFY_KEY_ENV
from erpilot_platform.grants import GRANT_KEYS_HINT, load_signing_key, load_verify_key
from erpilot_platform.ledger_signatures import LEDGER_KEYS_HINT
from erpilot_platform.ledger_signatures import SIGNING_KEY_ENV as LEDGER_SIGNING_KEY_ENV
from erpilot_platform.settings import ConfigurationError, PlatformSettings

ASSERTION_KEYS_HINT = ("outside dev mode the gateway needs ERPILOT_ASSERTION_SIGNING_KEY and the ERP and the approval "
                       "service ERPILOT_ASSERTION_VERIFY_KEY; `erpilot keygen` prints new pairs")


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
        return _verify_key(self.grant_verify_key, "ERPILOT_GRANT_VERIFY_KEY", GRANT_KEYS_HINT, "grant",
                           dev_mode=self.dev_mode, data_dir=self.data_dir)

    def assertion_key(self) -> Ed25519PublicKey:
        """ERPILOT_ASSERTION_VERIFY_KEY (the gateway's requester assertions); only in dev mode, else the ERP's
        development copy of the assertion pair's public key (``$ERPILOT_DATA_DIR/keys/erp/``)."""
        return _verify_key(self.assertion_verify_key, VERIFY_KEY_ENV, ASSERTION_KEYS_HINT, "assertion",
                           dev_mode=self.dev_mode, data_dir=self.data_dir)

    def ledger_key(self) -> Ed25519PrivateKey:
        """ERPILOT_LEDGER_SIGNING_KEY (signs every ``cmd.approval.request`` the ERP outboxes); only in dev mode, else
        the ERP's development key file (``$ERPILOT_DATA_DIR/keys/erp/``, ``erpilot_platform.dev_keys``; created
        once, kept, so a request still in the outbox at a restart verifies after it).

        Outside dev mode a missing key stops start-up: only the ERP may hold it, and a replica with another data
        directory would sign with another key.
        """
        if not self.ledger_signing_key and not self.dev_mode:
            raise ConfigurationError(f"{LEDGER_SIGNING_KEY_ENV} is not set; {LEDGER_KEYS_HINT}")
        try:
            if self.ledger_signing_key:
                return load_signing_key(self.ledger_signing_key, kind="ledger signing")
            return dev_keys.signing_key(Path(self.data_dir), "ledger")
        except (ValueError, OSError) as exc:
            source = (LEDGER_SIGNING_KEY_ENV if self.ledger_signing_key
                      else f"ledger key under {dev_keys.service_dir(self.data_dir, 'erp')}")
            raise ConfigurationError(f"{source}: {exc}") from None


def _verify_key(value: str | None, name: str, hint: str, stem: str, *, dev_mode: bool,
                data_dir: Path) -> Ed25519PublicKey:
    if value:
        try:
            return load_verify_key(value, kind=f"{stem} verify")
        except ValueError as exc:
            raise ConfigurationError(f"{name}: {exc}") from None
    if not dev_mode:
        raise ConfigurationError(f"{name} is not set; {hint}")
    try:
        return dev_keys.verify_key(Path(data_dir), stem, "erp")
    except (ValueError, OSError) as exc:
        raise ConfigurationError(f"{stem} key under {dev_keys.service_dir(data_dir, 'erp')}: {exc}") from None
