"""Approval settings (``ERPILOT_*``)."""

from __future__ import annotations

from pathlib import Path

from erpilot_approval.domain.policy import Policy, PolicyError, load_policy
from erpilot_platform.settings import ConfigurationError, PlatformSettings


class ApprovalSettings(PlatformSettings):
    policy: Path | None = None
    grant_signing_key: str | None = None
    expiry_poll_seconds: float = 0.2

    def load_policy(self) -> Policy:
        """The policy in force; a malformed file stops start-up with a message naming the key."""
        if self.policy is None:
            return load_policy(None)
        try:
            text = self.policy.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"ERPILOT_POLICY: cannot read {self.policy}: {exc}") from exc
        try:
            return load_policy(text)
        except PolicyError as exc:
            raise ConfigurationError(f"ERPILOT_POLICY {self.policy}: {exc}") from exc
