"""Composition root of the approval service."""

from __future__ import annotations

from pathlib import Path

from erpilot_approval.adapters import tables
from erpilot_approval.adapters.dead_letters import NatsDeadLetters
from erpilot_approval.adapters.erp import ErpClient
from erpilot_approval.adapters.store import unit_of_work
from erpilot_approval.domain import links
from erpilot_approval.entrypoints import nats as nats_entry
from erpilot_approval.entrypoints import webhooks as webhook_entry
from erpilot_approval.service_layer.audit import CheckpointSigner
from erpilot_approval.service_layer.escalation import escalation_sweeper
from erpilot_approval.service_layer.expiry import expiry_sweeper
from erpilot_approval.service_layer.expiry_warnings import WarningSweeper
from erpilot_approval.service_layer.gauges import refresh_pending_gauge
from erpilot_approval.service_layer.ports import ApprovalUnitOfWork, ErpPort, Ports
from erpilot_approval.service_layer.sweeper import DEADLINES_CHANNEL
from erpilot_approval.service_layer.webhook_dispatch import WebhookDispatcher
from erpilot_approval.service_layer.webhook_events import WebhookEvents
from erpilot_approval.settings import ApprovalSettings
from erpilot_platform import advisory_locks
from erpilot_platform.broker import create_broker
from erpilot_platform.db import create_engine
from erpilot_platform.endpoints import ServiceBus
from erpilot_platform.logs import configure_logging
from erpilot_platform.notifications import Listener
from erpilot_platform.outbox import Outbox
from erpilot_platform.runtime import ServiceApp, register_ping, run_service, serve
from erpilot_platform.telemetry import metrics_exported

SERVICE = "approval"
MIGRATIONS = Path(__file__).parent / "migrations"


def build(settings: ApprovalSettings, *, uow: ApprovalUnitOfWork | None = None, erp: ErpPort | None = None
          ) -> ServiceApp:
    """Compose the approval service. Nothing connects yet; a malformed policy or a missing key stops here.

    ``uow`` replaces the PostgreSQL unit of work every use case, query and background job runs on, ``erp`` the
    NATS client of the ERP that edits ask (tests: ``tests/fakes.py``'s memory unit of work and fake ERP).
    """
    policy = settings.load_policy()
    signing_key = settings.signing_key()
    assertion_key = settings.assertion_key()
    ledger_key = settings.ledger_key()
    engine = create_engine(settings.database_url, application_name="erpilot-approval")
    broker = create_broker(settings.nats_url, SERVICE, user=settings.nats_user, password=settings.nats_password)
    service_bus = ServiceBus(broker, SERVICE, settings.retry_policy(), ack_wait=settings.ack_wait_seconds)
    outbox = Outbox(tables.outbox, lock_key=advisory_locks.APPROVAL_OUTBOX)
    unit = uow or unit_of_work(engine, outbox, signing_key)
    # The sweepers hear of every replica's new approvals only from the database: a substitute has none.
    deadlines = Listener(settings.database_url, DEADLINES_CHANNEL, lambda: new_approval(),
                         application_name="erpilot-approval-deadlines") if uow is None else None
    listening = lambda: deadlines is not None and deadlines.listening  # noqa: E731
    sweeper = expiry_sweeper(unit, poll_seconds=settings.expiry_poll_seconds, listening=listening)
    escalations = escalation_sweeper(unit, poll_seconds=settings.expiry_poll_seconds, listening=listening)

    def new_approval() -> None:
        """A new deadline and maybe a new escalation time: both sweepers look again."""
        sweeper.wake()
        escalations.wake()

    chat_secret = settings.chat_signing_secret.get_secret_value().encode() if settings.chat_signing_secret else None
    ports = Ports(unit=unit, erp=erp or ErpClient(broker), policy=policy, signing_key=signing_key,
                  assertion_key=assertion_key, ledger_key=ledger_key, new_deadline=new_approval,
                  people=settings.people(policy), chat_secret=chat_secret, wake_webhooks=lambda: dispatcher.wake())
    register_ping(service_bus, engine)
    nats_entry.register(service_bus, ports)
    signer = CheckpointSigner(unit, settings.audit_checkpoint_seconds)
    webhooks = settings.load_webhooks(policy)
    mailer = settings.mailer(signing_key)
    dispatcher = WebhookDispatcher(unit, webhooks, dead_letters=NatsDeadLetters(broker),
                                   retry_base_seconds=settings.webhook_retry_base_seconds,
                                   give_up_after=settings.give_up_after(),
                                   timeout_seconds=settings.webhook_timeout_seconds, mailer=mailer)
    recipients = (lambda approval: links.recipients(approval, ports.people(), policy.contacts)) if mailer else None
    webhook_entry.register(service_bus, WebhookEvents(unit, webhooks, settings.public_url, wake=dispatcher.wake,
                                                      mail_recipients=recipients, chat_url=policy.chat_url))
    warnings = WarningSweeper(unit, policy)

    async def relay() -> None:
        await outbox.run(engine, broker)

    async def expiry() -> None:
        await sweeper.run()

    async def escalation() -> None:
        await escalations.run()

    async def pending_gauge() -> None:
        await refresh_pending_gauge(unit)

    async def webhook_dispatch() -> None:
        await dispatcher.run()

    async def expiry_warnings() -> None:
        await warnings.run()

    async def audit_checkpoints() -> None:
        await signer.run()

    async def deadline_listener() -> None:
        await deadlines.run()

    background = [relay, expiry, escalation, audit_checkpoints]
    background += [deadline_listener] if deadlines is not None else []
    background += [pending_gauge] if metrics_exported() else []  # a count every 5 s that nobody reads
    background += [webhook_dispatch] if webhooks or mailer or policy.chat_url else []
    background += [expiry_warnings] if warnings.windows else []  # a loop with nothing to do would end
    return ServiceApp(SERVICE, broker, engine, background=background)


def main() -> None:
    settings = ApprovalSettings()
    configure_logging(SERVICE, settings.log_level)
    run_service(serve(build(settings)))
