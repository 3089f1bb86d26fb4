"""ERP settings (``ERPILOT_*``) and the keys it verifies with."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from erpilot_platform import dev_keys
from erpilot_platform.assertions import VERIFY_KEY_ENV
from erpilot_platform.grants import GRANT_KEYS_HINT, load_verify_key
from erpilot_platform.settings import ConfigurationError, PlatformSettings

ASSERTION_KEYS_HINT = ("outside dev mode the gateway needs ERPILOT_ASSERTION_SIGNING_KEY and the ERP and the approval "
                       "service ERPILOT_ASSERTION_VERIFY_KEY; `erpilot keygen` prints new pairs")


class ErpSettings(PlatformSettings):
    grant_verify_key: str | None = None
    assertion_verify_key: str | None = None
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
