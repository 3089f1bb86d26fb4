"""Gateway settings (``ERPILOT_*``)."""

from __future__ import annotations

from typing import ClassVar

from erpilot_platform.settings import PlatformSettings, require_secret


class GatewaySettings(PlatformSettings):
    requires_database: ClassVar[bool] = False

    auth_secret: str | None = None
    http_host: str = "127.0.0.1"
    http_port: int = 8000
    request_timeout_seconds: float = 20.0

    def secret(self) -> str:
        """The JWT secret; start-up stops here when it is missing outside dev mode."""
        return require_secret("ERPILOT_AUTH_SECRET", self.auth_secret, dev_mode=self.dev_mode)
