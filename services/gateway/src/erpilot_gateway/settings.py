"""Gateway settings (``ERPILOT_*``)."""

from __future__ import annotations

from typing import ClassVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import Field, field_validator

from erpilot_gateway.auth import TokenRules
from erpilot_platform.assertions import ASSERTION_KEYS_HINT, SIGNING_KEY_ENV
from erpilot_platform.grants import load_signing_key
from erpilot_platform.settings import (
    ConfigurationError,
    PlatformSettings,
    parse_duration,
    require_secret,
    signing_key_setting,
)

MIN_SECRET_BYTES = 32
MAKE_A_SECRET = ("make one with `openssl rand -base64 48` "
                 "(or `python3 -c 'import secrets; print(secrets.token_urlsafe(48))'`)")


class GatewaySettings(PlatformSettings):
    requires_database: ClassVar[bool] = False

    auth_secret: str | None = None
    auth_issuer: str | None = Field(None, description="When set, tokens must carry exactly this `iss`.")
    auth_audience: str | None = Field(None, description="When set, tokens must name this `aud`.")
    auth_max_ttl: str = Field("24h", description="Longest token lifetime accepted (exp - iat, or exp - now).")
    http_host: str = "127.0.0.1"
    http_port: int = 8000
    request_timeout_seconds: float = 20.0
    assertion_signing_key: str | None = Field(
        None, description="Base64 raw Ed25519 key the gateway signs requester assertions with (the gateway's alone); "
                          "unset: only in dev mode, the development key file in ERPILOT_DATA_DIR/keys/gateway.")
    assertion_previous_signing_key: str | None = Field(
        None, description="After a rotation of ERPILOT_ASSERTION_SIGNING_KEY, the key before it: it signs nothing; "
                          "the sessions made under it stay their owners' (a session id carries a MAC derived from "
                          "the key it was made with). Unset: those sessions answer 404.")

    @field_validator("auth_issuer", "auth_audience")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value or None

    def secret(self) -> str:
        """The JWT secret; start-up stops here when it is missing, or shorter than 32 bytes outside dev mode."""
        secret = require_secret("ERPILOT_AUTH_SECRET", self.auth_secret, dev_mode=self.dev_mode)
        if not self.dev_mode and len(secret.encode("utf-8")) < MIN_SECRET_BYTES:
            raise ConfigurationError(
                f"ERPILOT_AUTH_SECRET is {len(secret.encode('utf-8'))} bytes; outside dev mode it needs at least "
                f"{MIN_SECRET_BYTES} random bytes: {MAKE_A_SECRET}")
        return secret

    def token_rules(self) -> TokenRules:
        """Everything a token is verified against (secret, issuer, audience, longest lifetime)."""
        try:
            max_ttl = parse_duration(self.auth_max_ttl)
        except ValueError as exc:
            raise ConfigurationError(f"ERPILOT_AUTH_MAX_TTL: {exc}") from None
        return TokenRules(secret=self.secret(), issuer=self.auth_issuer, audience=self.auth_audience,
                          max_ttl_seconds=max_ttl.total_seconds())

    def assertion_key(self) -> Ed25519PrivateKey:
        """ERPILOT_ASSERTION_SIGNING_KEY; only in dev mode, else the gateway's development key file
        (``$ERPILOT_DATA_DIR/keys/gateway/``, ``erpilot_platform.dev_keys``).

        Outside dev mode a missing key stops start-up: with a key generated into a data directory, whoever reads
        that directory could vouch for anyone, and a replica with another directory would sign with another key.
        """
        return signing_key_setting(self.assertion_signing_key, variable=SIGNING_KEY_ENV, hint=ASSERTION_KEYS_HINT,
                                   stem="assertion", dev_mode=self.dev_mode, data_dir=self.data_dir)

    def previous_assertion_key(self) -> Ed25519PrivateKey | None:
        """ERPILOT_ASSERTION_PREVIOUS_SIGNING_KEY, if set (a value that does not load stops start-up)."""
        if not self.assertion_previous_signing_key:
            return None
        try:
            return load_signing_key(self.assertion_previous_signing_key, kind="previous assertion signing")
        except ValueError as exc:
            raise ConfigurationError(f"ERPILOT_ASSERTION_PREVIOUS_SIGNING_KEY: {exc}") from None
