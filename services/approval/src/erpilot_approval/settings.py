"""Approval settings (``ERPILOT_*``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import Field, SecretStr

from erpilot_approval.adapters.role_source import RoleSourceFile
from erpilot_approval.adapters.smtp import SmtpMailer
from erpilot_approval.domain.links import link_key
from erpilot_approval.domain.people import Directory, directory
from erpilot_approval.domain.policy import Policy, PolicyError, load_policy, parse_duration
from erpilot_approval.domain.webhooks import Webhook, parse_webhooks
from erpilot_platform.assertions import ASSERTION_KEYS_HINT, VERIFY_KEY_ENV
from erpilot_platform.grants import GRANT_KEYS_HINT
from erpilot_platform.ledger_signatures import LEDGER_KEYS_HINT
from erpilot_platform.ledger_signatures import VERIFY_KEY_ENV as LEDGER_VERIFY_KEY_ENV
from erpilot_platform.settings import ConfigurationError, PlatformSettings, signing_key_setting, verify_key_setting


class ApprovalSettings(PlatformSettings):
    policy: Path | None = None
    role_source: Path | None = Field(
        None, description="TOML file of each person's roles now ([people.<sub>] roles = [...]), re-read when it "
                          "changes: a delegation decides only with roles its giver still holds there.")
    grant_signing_key: str | None = Field(None, description="Base64 raw Ed25519 key; unset: only in dev mode, the "
                                                             "service's development key file (keys/approval).")
    assertion_verify_key: str | None = Field(
        None, description="Base64 raw Ed25519 public key of the gateway's requester assertions; unset: only in dev "
                          "mode, the service's development key file (keys/approval).")
    ledger_verify_key: str | None = Field(
        None, description="Base64 raw Ed25519 public key of the ERP's ledger key (its approval requests are signed "
                          "with it); unset: only in dev mode, the service's development key file (keys/approval).")
    expiry_poll_seconds: float = Field(1.0, gt=0, le=1.0, description="Longest sleep of the expiry sweeper.")
    webhooks: str | None = Field(None, description='JSON list of {"url", "events"?, "secret"} (added to [[webhooks]]).')
    webhook_retry_base_seconds: float = Field(1.0, gt=0, le=600, description="First retry delay; doubles each time.")
    webhook_give_up_after: str = Field("24h", description="After this long since the event, a delivery is dead.")
    webhook_timeout_seconds: float = Field(10.0, gt=0, le=120)
    smtp_url: str | None = Field(None, description="smtp://host:port: email each person who may decide a new "
                                                    "approval (their [people.<sub>] email) with one-time links.")
    smtp_from: str = Field("erpilot@localhost", description="The From address of approval emails.")
    smtp_max_attempts: int = Field(8, ge=1, le=100, description="Attempts per email before it is a dead letter.")
    chat_signing_secret: SecretStr | None = Field(
        None, description="Slack's signing secret: the chat card's button callbacks are checked with it (v0 HMAC).")
    audit_checkpoint_seconds: float = Field(60.0, gt=0, le=86400,
                                            description="How often the audit log's head is signed (when it moved).")

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

    def people(self, policy: Policy) -> Callable[[], Directory | None]:
        """The people directory as of each call: the policy's ``[people]`` overlaid with ``ERPILOT_ROLE_SOURCE``
        (re-read when it changes); a role source that cannot be read or parsed stops start-up."""
        if self.role_source is None:
            return lambda: policy.people
        try:
            source = RoleSourceFile(self.role_source)
        except (OSError, PolicyError) as exc:
            raise ConfigurationError(f"ERPILOT_ROLE_SOURCE {self.role_source}: {exc}") from exc
        return lambda: directory(policy.people, source())

    def load_webhooks(self, policy: Policy) -> tuple[Webhook, ...]:
        """``[[webhooks]]`` of the policy file, then ``ERPILOT_WEBHOOKS``; a malformed entry stops start-up."""
        if not self.webhooks:
            return policy.webhooks
        try:
            entries = json.loads(self.webhooks)
            return policy.webhooks + parse_webhooks(entries, "ERPILOT_WEBHOOKS")
        except ValueError as exc:  # JSON errors and WebhookConfigError alike
            raise ConfigurationError(f"ERPILOT_WEBHOOKS: {exc}") from exc

    def mailer(self, signing_key: Ed25519PrivateKey) -> SmtpMailer | None:
        """The approval emails' sender (None without ERPILOT_SMTP_URL); its links' key derives from the grant key."""
        if not self.smtp_url:
            return None
        try:
            return SmtpMailer(self.smtp_url, self.smtp_from, link_key(signing_key), self.public_url,
                              max_attempts=self.smtp_max_attempts, timeout_seconds=self.webhook_timeout_seconds)
        except ValueError as exc:
            raise ConfigurationError(f"ERPILOT_SMTP_URL: {exc}") from exc

    def give_up_after(self) -> timedelta:
        try:
            return parse_duration(self.webhook_give_up_after, "ERPILOT_WEBHOOK_GIVE_UP_AFTER")
        except PolicyError as exc:
            raise ConfigurationError(str(exc)) from exc

    def signing_key(self) -> Ed25519PrivateKey:
        """ERPILOT_GRANT_SIGNING_KEY; only in dev mode, else the approval service's development key file
        (``$ERPILOT_DATA_DIR/keys/approval/``, ``erpilot_platform.dev_keys``; created once, kept)."""
        return signing_key_setting(self.grant_signing_key, variable="ERPILOT_GRANT_SIGNING_KEY", hint=GRANT_KEYS_HINT,
                                   stem="grant", dev_mode=self.dev_mode, data_dir=self.data_dir)

    def assertion_key(self) -> Ed25519PublicKey:
        """ERPILOT_ASSERTION_VERIFY_KEY: the key that tells whether the gateway vouched for a requester
        (``cmd.approval.request``) or for the owner of a cancel (``evt.agent.run_cancelled``); only in dev mode, else
        the approval service's development copy (``$ERPILOT_DATA_DIR/keys/approval/``)."""
        return verify_key_setting(self.assertion_verify_key, variable=VERIFY_KEY_ENV, hint=ASSERTION_KEYS_HINT,
                                  stem="assertion", service="approval", dev_mode=self.dev_mode,
                                  data_dir=self.data_dir)

    def ledger_key(self) -> Ed25519PublicKey:
        """ERPILOT_LEDGER_VERIFY_KEY: the key that tells whether a ``cmd.approval.request`` is the ledger's own
        (signed by the ERP) and not one another publisher made up; only in dev mode, else the approval service's
        development copy (``$ERPILOT_DATA_DIR/keys/approval/``)."""
        return verify_key_setting(self.ledger_verify_key, variable=LEDGER_VERIFY_KEY_ENV, hint=LEDGER_KEYS_HINT,
                                  stem="ledger", service="approval", dev_mode=self.dev_mode, data_dir=self.data_dir)
