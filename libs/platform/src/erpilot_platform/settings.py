"""Settings shared by every service, read from ``ERPILOT_*`` environment variables."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import ClassVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from erpilot_platform import dev_keys
from erpilot_platform.grants import load_signing_key, load_verify_key
from erpilot_platform.retries import RetryPolicy

DEV_SECRET_PLACEHOLDERS = {"", "changeme", "change-me", "secret", "dev"}
_DURATION = re.compile(r"\s*(\d+)\s*([smhd])\s*")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ConfigurationError(RuntimeError):
    """A setting is missing or malformed; start-up stops with this message."""


def signing_key_setting(value: str | None, *, variable: str, hint: str, stem: str, dev_mode: bool,
                        data_dir: Path) -> Ed25519PrivateKey:
    """The private key ``variable`` holds, else in dev mode the signer's file of the ``stem`` pair
    (``_key_setting``)."""
    return _key_setting(value, variable=variable, hint=hint, stem=stem, service=None, dev_mode=dev_mode,
                        data_dir=data_dir)


def verify_key_setting(value: str | None, *, variable: str, hint: str, stem: str, service: str, dev_mode: bool,
                       data_dir: Path) -> Ed25519PublicKey:
    """The public key ``variable`` holds, else in dev mode ``service``'s copy of the ``stem`` pair's public key
    (``_key_setting``)."""
    return _key_setting(value, variable=variable, hint=hint, stem=stem, service=service, dev_mode=dev_mode,
                        data_dir=data_dir)


def _key_setting(value: str | None, *, variable: str, hint: str, stem: str, service: str | None, dev_mode: bool,
                 data_dir: Path):
    """One rule for every Ed25519 key a service holds (grants, requester assertions, the ledger's requests): the
    base64 raw key in ``variable``; unset, only in dev mode, the service's own file of the ``stem`` pair
    (``erpilot_platform.dev_keys``: ``$ERPILOT_DATA_DIR/keys/<service>/``, created once; ``service`` None: the
    signer's private key).

    Outside dev mode a missing key stops start-up (``hint`` says how to make one): a key generated into a data
    directory is a key whoever reads that directory holds, and a replica with another directory would have
    another. A value or key file that does not load stops it too, naming where the key came from.
    """
    if not value and not dev_mode:
        raise ConfigurationError(f"{variable} is not set; {hint}")
    private = service is None
    kind = f"{stem} {'signing' if private else 'verify'}"
    try:
        if value:
            return load_signing_key(value, kind=kind) if private else load_verify_key(value, kind=kind)
        if private:
            return dev_keys.signing_key(Path(data_dir), stem)
        return dev_keys.verify_key(Path(data_dir), stem, service)
    except (ValueError, OSError) as exc:
        owner = service or dev_keys.PAIRS[stem].signer
        source = variable if value else f"{stem} key under {dev_keys.service_dir(Path(data_dir), owner)}"
        raise ConfigurationError(f"{source}: {exc}") from None


class PlatformSettings(BaseSettings):
    """What every service needs: where the broker and database are, and how to behave."""

    model_config = SettingsConfigDict(env_prefix="ERPILOT_", extra="ignore")

    nats_url: str = Field("nats://127.0.0.1:4222", description="NATS server URL(s), comma separated.")
    nats_user: str | None = None
    nats_password: str | None = None
    database_url: str = Field("", description="Any libpq URL, including unix sockets (?host=/dir).")
    data_dir: Path = Path(".erpilot")
    dev_mode: bool = Field(False, description="Set by `erpilot up`: allows generated dev secrets.")
    failpoints: str = ""
    ack_wait_seconds: float = Field(15.0, ge=1.0, description="JetStream ack wait of every durable consumer: "
                                    "an unacknowledged message (its consumer crashed) is redelivered after it.")
    log_level: str = "INFO"
    public_url: str = Field("http://127.0.0.1:8000", description="Base URL people use to reach the console.")
    delivery_max_attempts: int = Field(30, ge=1, description="Deliveries of a failing command or event "
                                       "before it is dead-lettered (erpilot_platform.retries).")
    delivery_max_age_seconds: float = Field(1800.0, gt=0, description="A message still failing this long "
                                            "after it was published is dead-lettered.")

    # Services that own a schema need a database; the gateway owns none.
    requires_database: ClassVar[bool] = True

    def retry_policy(self) -> RetryPolicy:
        """When this service's consumers give a failing message up (``ERPILOT_DELIVERY_*``)."""
        return RetryPolicy(max_attempts=self.delivery_max_attempts, max_age_seconds=self.delivery_max_age_seconds)

    @model_validator(mode="after")
    def _database_required(self) -> PlatformSettings:
        if self.requires_database and not self.database_url:
            raise ConfigurationError("ERPILOT_DATABASE_URL is not set (run `erpilot up` for a local stack)")
        return self


def require_secret(name: str, value: str | None, *, dev_mode: bool) -> str:
    """Return the secret, or stop start-up with a clear message when it is missing outside dev mode."""
    if value and (dev_mode or value.strip().lower() not in DEV_SECRET_PLACEHOLDERS):
        return value
    raise ConfigurationError(
        f"{name} is not set (or is a placeholder). Set it in the environment; "
        "only `erpilot up` (dev mode) may generate one."
    )


def parse_duration(value: str) -> timedelta:
    """``"90s"``, ``"15m"``, ``"24h"``, ``"7d"`` as a positive timedelta; anything else is a ValueError."""
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None or int(match[1]) == 0:
        raise ValueError(f"expected a positive duration like '24h', got {value!r}")
    return timedelta(seconds=int(match[1]) * _UNIT_SECONDS[match[2]])
