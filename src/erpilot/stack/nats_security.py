"""Least-privilege NATS users for a deployment, generated from the contracts.

SPEC §8: "the agent and the model cannot produce a decision (NATS subject permissions in the
deployed configuration enforce it too)". One NATS user per service plus ``admin`` (operations: it
declares the JetStream streams and durable consumers at ``erpilot migrate`` / ``erpilot up`` time). Every subject
comes from ``erpilot_contracts.subjects`` and every durable consumer name from ``ServiceBus``, so the
configuration cannot drift from the contracts; ``TRAFFIC`` records who sends what (the unit tests
check it against the subscribers the real service apps register, the e2e test runs the whole
approval flow on it).

How JetStream maps onto subject permissions:

- Publishing into a stream is a publish on the subject (the PubAck comes back to the client's inbox).
- A durable pull consumer (declared by ``erpilot migrate``) needs only
  ``$JS.API.CONSUMER.INFO|MSG.NEXT.<stream>.<durable>``: its service checks it and binds to it. Acks,
  naks and in-progress go to ``$JS.ACK.<stream>.<durable>.>``. It subscribes to the consumer's
  ``$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.<stream>.<durable>`` to re-arm its pull when a new leader
  forgot it (``erpilot_platform.broker.watch_consumer_leaders``).
- A JetStream request carries its reply inbox in a ``reply_to`` header, so the services that answer
  commands publish to the callers' inboxes; core queries and retried commands (``req.*``: core requests the
  receiver stores before answering, issue 31) are answered through ``allow_responses``.
- The write path's next step leaves an outbox as a command (``outbox_commands``: the ERP's
  ``cmd.approval.request``, the approval service's ``cmd.erp.commit``): a publish on the subject, no answer
  awaited. Each is denied to every other service (``WRITE_PATH_STEPS``), the agent above all.
- The gateway watches the session subjects with core subscriptions (``watches_session_events``): the 202 of a
  tool call waits there for the call's ``approval_pending``, and the SSE stream passes them on (it replays from
  the agent's store through ``query.agent.events``; session events are no stream's any more).
- Streams and durable consumers belong to ``admin`` (``erpilot migrate``, the JetStream migration of
  ``erpilot_platform.jetstream``). A service may only read their configuration (``STREAM.INFO``,
  ``CONSUMER.INFO``) to verify it at start-up; no service may create, update, delete or purge a stream
  or a consumer (explicit denies, which win over any allow).
- Each user subscribes only to its own inbox prefixes (``_INBOX`` for everyone while ``create_broker``
  gives every service the default prefix: see ``inboxes_isolated``). A service answers into its callers'
  inboxes, and the agent only into the prefix apart where the gateway waits for the agent's answers
  (``erpilot_platform.broker.ANSWERED_APART``): it may not publish to the inboxes of the gateway's requests to
  the approval service or the ERP (issue 32).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from erpilot_contracts import subjects as s
from erpilot_contracts.subjects import ALL_STREAMS, COMMANDS_STREAM, EVENTS_STREAM, PREFIX, RETIRED_STREAMS
from erpilot_platform.broker import ANSWERED_APART, leader_elected_subject

SERVICES = ("gateway", "agent", "approval", "erp")
ADMIN = "admin"
USERS = (*SERVICES, ADMIN)
JS_DOMAIN = "erpilot"  # the main configuration must set `jetstream { domain: erpilot }`
DEFAULT_INBOX = "_INBOX"


@dataclass(frozen=True)
class Traffic:
    """What one service sends and receives over NATS (from its entrypoints, adapters and outbox)."""

    sends_commands: tuple[str, ...] = ()    # JetStream requests into ERPILOT_COMMANDS (answered in its inbox)
    outbox_commands: tuple[str, ...] = ()   # the write path's next step, relayed from its outbox (no answer awaited)
    sends_queries: tuple[str, ...] = ()     # core request/reply
    sends_requests: tuple[str, ...] = ()    # retried commands: core requests the receiver stores (``req.*``)
    publishes_events: tuple[str, ...] = ()  # outbox relay into ERPILOT_EVENTS, session events on core NATS
    consumes_commands: tuple[str, ...] = ()  # durable consumers on ERPILOT_COMMANDS
    consumes_events: tuple[str, ...] = ()    # durable consumers on ERPILOT_EVENTS
    answers_queries: tuple[str, ...] = ()    # core subscriptions with a queue group
    answers_requests: tuple[str, ...] = ()   # retried commands: core subscriptions with a queue group
    watches_session_events: bool = False     # core subscriptions to the session subjects (a 202, the SSE stream)
    runs_service_app: bool = True            # ServiceApp.start: verify streams, dead letters


# The write path (ARCHITECTURE "The life of a write"): the agent asks the ERP to prepare; the ERP's outbox asks
# the approval service; the approval service's outbox sends the commit with the decision. The agent may send
# neither the approval request nor the commit: what a person approves and who asked for it come from the ledger,
# and only a decision starts a commit.
TRAFFIC: dict[str, Traffic] = {
    "gateway": Traffic(
        sends_commands=(s.AGENT_CMD_CREATE_SESSION, s.AGENT_CMD_POST_MESSAGE,
                        s.AGENT_CMD_CANCEL_RUN, s.APPROVAL_CMD_DECIDE_MANY,
                        s.APPROVAL_CMD_EDIT, s.APPROVAL_CMD_DELEGATE, s.APPROVAL_CMD_REVOKE_DELEGATION,
                        s.APPROVAL_CMD_STAND, s.APPROVAL_CMD_REVOKE_STANDING, s.APPROVAL_CMD_END_RUN,
                        s.APPROVAL_CMD_DECIDE_BY_LINK,
                        s.APPROVAL_CMD_CHAT_ACTION,
                        s.ERP_CMD_UPDATE_PRODUCT),
        sends_requests=(s.AGENT_REQ_TOOL_CALL, s.APPROVAL_REQ_DECIDE),
        sends_queries=(s.AGENT_QUERY_SESSIONS, s.AGENT_QUERY_SESSION, s.AGENT_QUERY_TOOL_CALL,
                       s.APPROVAL_QUERY_POLICY, s.APPROVAL_QUERY_GET, s.APPROVAL_QUERY_LIST, s.APPROVAL_QUERY_AUDIT,
                       s.APPROVAL_QUERY_REFERRING, s.APPROVAL_QUERY_DELEGATIONS, s.APPROVAL_QUERY_STANDING,
                       s.APPROVAL_QUERY_EMAIL_LINK, s.ERP_QUERY_VIEW, s.ERP_QUERY_OPERATION, s.AGENT_QUERY_EVENTS,
                       s.ping_subject("agent"), s.ping_subject("approval"), s.ping_subject("erp")),
        watches_session_events=True,
        runs_service_app=False,
    ),
    "agent": Traffic(
        sends_commands=(s.ERP_CMD_PREPARE,),
        sends_requests=(s.ERP_REQ_DRAFT,),
        sends_queries=(s.APPROVAL_QUERY_POLICY, s.ERP_QUERY_READ),
        publishes_events=(s.SESSION_EVENTS_ALL, s.AGENT_EVT_RUN_CANCELLED),
        consumes_commands=(s.AGENT_CMD_CREATE_SESSION, s.AGENT_CMD_POST_MESSAGE, s.AGENT_CMD_CANCEL_RUN),
        answers_requests=(s.AGENT_REQ_TOOL_CALL,),
        # The call's approval (requested, refused by the policy, voted, expiring, escalated, resolved) and its
        # commit's outcome.
        consumes_events=(s.APPROVAL_EVT_REQUESTED, s.APPROVAL_EVT_REQUEST_REFUSED, s.APPROVAL_EVT_RESOLVED,
                         s.APPROVAL_EVT_EXPIRING, s.APPROVAL_EVT_ESCALATED, s.APPROVAL_EVT_VOTED,
                         s.ERP_EVT_OPERATION_FINISHED),
        answers_queries=(s.AGENT_QUERY_SESSIONS, s.AGENT_QUERY_SESSION, s.AGENT_QUERY_TOOL_CALL,
                         s.AGENT_QUERY_EVENTS, s.ping_subject("agent")),
    ),
    "approval": Traffic(
        sends_commands=(s.ERP_CMD_PREPARE,),  # an edit's new version, prepared by the ledger
        outbox_commands=(s.ERP_CMD_COMMIT,),  # with the approving decision, in its transaction
        publishes_events=(s.APPROVAL_EVT_REQUESTED, s.APPROVAL_EVT_REQUEST_REFUSED, s.APPROVAL_EVT_RESOLVED,
                          s.APPROVAL_EVT_EXPIRING, s.APPROVAL_EVT_ESCALATED, s.APPROVAL_EVT_VOTED),
        answers_requests=(s.APPROVAL_REQ_DECIDE,),
        consumes_commands=(s.APPROVAL_CMD_REQUEST, s.APPROVAL_CMD_DECIDE_MANY,
                           s.APPROVAL_CMD_EDIT, s.APPROVAL_CMD_DELEGATE, s.APPROVAL_CMD_REVOKE_DELEGATION,
                           s.APPROVAL_CMD_STAND, s.APPROVAL_CMD_REVOKE_STANDING, s.APPROVAL_CMD_END_RUN,
                           s.APPROVAL_CMD_DECIDE_BY_LINK,
                           s.APPROVAL_CMD_CHAT_ACTION),
        # The agent's record of a cancel (withdrawals.py), then webhooks (service_layer/webhooks.py) and the
        # audit log's commit outcomes: what outgoing notifications tell, from committed events only.
        consumes_events=(s.AGENT_EVT_RUN_CANCELLED, s.APPROVAL_EVT_REQUESTED, s.APPROVAL_EVT_RESOLVED,
                         s.APPROVAL_EVT_EXPIRING, s.APPROVAL_EVT_ESCALATED, s.ERP_EVT_OPERATION_FINISHED),
        answers_queries=(s.APPROVAL_QUERY_POLICY, s.APPROVAL_QUERY_GET, s.APPROVAL_QUERY_LIST,
                         s.APPROVAL_QUERY_AUDIT, s.APPROVAL_QUERY_REFERRING, s.APPROVAL_QUERY_DELEGATIONS,
                         s.APPROVAL_QUERY_STANDING, s.APPROVAL_QUERY_EMAIL_LINK, s.APPROVAL_QUERY_AUDIT_CHAIN,
                         s.ping_subject("approval")),
    ),
    "erp": Traffic(
        outbox_commands=(s.APPROVAL_CMD_REQUEST,),  # built from the prepared operation, in its transaction
        publishes_events=(s.ERP_EVT_OPERATION_FINISHED,),
        consumes_commands=(s.ERP_CMD_PREPARE, s.ERP_CMD_COMMIT, s.ERP_CMD_UPDATE_PRODUCT),
        answers_requests=(s.ERP_REQ_DRAFT,),
        answers_queries=(s.ERP_QUERY_READ, s.ERP_QUERY_OPERATION, s.ERP_QUERY_VIEW, s.ping_subject("erp")),
    ),
}

# Reserved whatever the allow lists say: a later, broader allow cannot undo these (deny wins in NATS).
# Only the gateway sends decisions in (a withdrawal follows the agent's evt.agent.run_cancelled, whose assertion
# the approval service verifies; there is no withdraw command any more). Giving and revoking a delegation decide
# who may decide: the same rule.
DECISION_SUBJECTS = (s.APPROVAL_REQ_DECIDE, s.APPROVAL_CMD_DECIDE_MANY, s.APPROVAL_CMD_EDIT, s.APPROVAL_CMD_DELEGATE,
                     s.APPROVAL_CMD_REVOKE_DELEGATION, s.APPROVAL_CMD_STAND, s.APPROVAL_CMD_REVOKE_STANDING,
                     s.APPROVAL_CMD_END_RUN, s.APPROVAL_CMD_DECIDE_BY_LINK, s.APPROVAL_CMD_CHAT_ACTION)
# The write path's steps that only one service may take: who asks for an approval (the ledger, from its record)
# and who starts a commit (the approval service, with the decision). Denied to every other service.
WRITE_PATH_STEPS = {s.APPROVAL_CMD_REQUEST: "erp", s.ERP_CMD_COMMIT: "approval"}
# Stream and consumer configuration is `erpilot migrate`'s (the admin user): denied to every service.
# ``CONSUMER.CREATE.<stream>.>`` denies every named (durable) create; no service is allowed the bare
# ``CONSUMER.CREATE.<stream>`` (an ephemeral) either.
DESTRUCTIVE_JS_API = ("$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.DELETE.>",
                      "$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.MSG.DELETE.>", "$JS.API.CONSUMER.CREATE.*.>",
                      "$JS.API.CONSUMER.DURABLE.CREATE.>", "$JS.API.CONSUMER.DELETE.>")


@dataclass(frozen=True)
class Permissions:
    publish_allow: tuple[str, ...]
    publish_deny: tuple[str, ...] = ()
    subscribe_allow: tuple[str, ...] = ()
    allow_responses: bool = False

    def may_publish(self, subject: str) -> bool:
        """NATS semantics for a literal subject: allowed by some pattern and denied by none."""
        return (any(covers(p, subject) for p in self.publish_allow)
                and not any(covers(p, subject) for p in self.publish_deny))

    def may_subscribe(self, subject: str) -> bool:
        """A subscription (wildcards allowed) must lie inside one allowed pattern."""
        return any(covers(p, subject) for p in self.subscribe_allow)


@dataclass(frozen=True)
class Consumer:
    service: str
    stream: str
    subject: str
    durable: str


def covers(pattern: str, subject: str) -> bool:
    """Whether every subject matched by ``subject`` is matched by ``pattern`` (``*``, ``>`` wildcards)."""
    p, t = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(t) > i
        if i >= len(t) or t[i] == ">" or (token != "*" and token != t[i]):
            return False
    return len(p) == len(t)


def durable_name(service: str, subject: str) -> str:
    """The durable consumer name ``ServiceBus`` gives ``service``'s consumer of ``subject``."""
    from erpilot_platform.endpoints import ServiceBus

    return ServiceBus(None, service)._durable_name(subject)  # type: ignore[arg-type]


def consumers(service: str) -> list[Consumer]:
    traffic = TRAFFIC[service]
    return ([Consumer(service, COMMANDS_STREAM.name, subj, durable_name(service, subj))
             for subj in traffic.consumes_commands]
            + [Consumer(service, EVENTS_STREAM.name, subj, durable_name(service, subj))
               for subj in traffic.consumes_events])


def service_inboxes() -> dict[str, str]:
    """The inbox prefix each service really uses, read from ``create_broker`` (requests, PubAcks) and
    ``ServiceBus`` (pull consumers) so it cannot drift: where the two differ, their common part."""
    from erpilot_contracts.base import Message
    from erpilot_platform.broker import create_broker
    from erpilot_platform.endpoints import ServiceBus

    async def nothing(_: Message) -> None:
        return None

    found = {}
    for service in SERVICES:
        broker = create_broker("nats://127.0.0.1:4222", service)  # nothing connects
        ServiceBus(broker, service).command(f"{PREFIX}.cmd.{service}.inbox_probe", Message)(nothing)
        prefixes = [getattr(broker, "_connection_kwargs", {}).get("inbox_prefix")]
        prefixes += [getattr(sub, "extra_options", {}).get("inbox_prefix") for sub in broker.subscribers]
        tokens = [(p.decode() if isinstance(p, bytes) else p or DEFAULT_INBOX).rstrip(".").split(".")
                  for p in prefixes]
        common = []
        for column in zip(*tokens, strict=False):
            if len(set(column)) > 1:
                break
            common.append(column[0])
        found[service] = ".".join(common) or DEFAULT_INBOX
    return found


def apart_inboxes() -> dict[tuple[str, str], str]:
    """(caller, answerer) → the inbox prefix where the caller waits for that answerer alone, read from the
    connections ``create_broker`` really makes (less each connection's random token)."""
    from erpilot_platform.broker import create_broker

    brokers = {service: create_broker("nats://127.0.0.1:4222", service) for service in ANSWERED_APART}  # unconnected
    return {(service, answerer): side._connection_kwargs["inbox_prefix"].rsplit(".", 1)[0]
            for service, broker in brokers.items() for answerer, side in getattr(broker, "apart", {}).items()}


def inboxes_isolated(inboxes: Mapping[str, str] | None = None,
                     apart: Mapping[tuple[str, str], str] | None = None) -> bool:
    """True when no service can subscribe to (or publish into) another service's inboxes, and no prefix apart
    lies inside another prefix."""
    inboxes = inboxes or service_inboxes()
    prefixes = [*inboxes.values(), *(apart_inboxes() if apart is None else apart).values()]
    return all(not covers(f"{a}.>", f"{b}.x") for i, a in enumerate(prefixes)
               for j, b in enumerate(prefixes) if i != j)


def callers(service: str) -> list[str]:
    """The services that send ``service`` commands (and wait for the answer in their inbox)."""
    mine = set(TRAFFIC[service].consumes_commands)
    return [other for other in SERVICES if other != service and mine & set(TRAFFIC[other].sends_commands)]


def service_permissions(service: str, inboxes: Mapping[str, str] | None = None,
                        apart: Mapping[tuple[str, str], str] | None = None) -> Permissions:
    inboxes = inboxes or service_inboxes()
    apart = apart_inboxes() if apart is None else apart
    traffic = TRAFFIC[service]
    publish: list[str] = [*traffic.sends_commands, *traffic.outbox_commands, *traffic.sends_requests,
                          *traffic.sends_queries, *traffic.publishes_events]
    subscribe: list[str] = [*traffic.answers_queries, *traffic.answers_requests, f"{inboxes[service]}.>"]
    subscribe += [f"{prefix}.>" for (caller, _), prefix in apart.items() if caller == service]
    if traffic.watches_session_events:
        subscribe.append(s.SESSION_EVENTS_ALL)
    # Answers to JetStream requests: into the caller's prefix apart for this service where it has one.
    publish += [f"{apart.get((caller, service), inboxes[caller])}.>" for caller in callers(service)]
    if traffic.runs_service_app:
        publish.append(s.dead_letter_subject(service, ">"))
        # Verified at start-up: every stream as declared, and no retired one left storing.
        verified = (*(stream.name for stream in ALL_STREAMS), *RETIRED_STREAMS)
        publish += [f"$JS.API.STREAM.INFO.{name}" for name in verified]
    for consumer in consumers(service):
        api = "$JS.API.CONSUMER"
        publish += [f"{api}.INFO.{consumer.stream}.{consumer.durable}",
                    f"{api}.MSG.NEXT.{consumer.stream}.{consumer.durable}",
                    f"$JS.ACK.{consumer.stream}.{consumer.durable}.>"]
        subscribe.append(leader_elected_subject(consumer.stream, consumer.durable))  # broker.watch_consumer_leaders
    deny = [f"{PREFIX}.evt.{other}.>" for other in SERVICES if other != service]
    if service != "gateway":
        deny += DECISION_SUBJECTS
    if service != "agent":
        deny.append(s.SESSION_EVENTS_ALL)
    deny += [subject for subject, owner in WRITE_PATH_STEPS.items() if owner != service]
    deny += DESTRUCTIVE_JS_API
    return Permissions(tuple(dict.fromkeys(publish)), tuple(deny), tuple(dict.fromkeys(subscribe)),
                       allow_responses=bool(traffic.answers_queries or traffic.answers_requests))


# What operations ask the services (``erpilot audit``): the admin user alone may.
OPERATIONS_QUERIES = (s.APPROVAL_QUERY_AUDIT_CHAIN,)


def admin_permissions() -> Permissions:
    """Operations: the whole JetStream API (plain and through the domain): `erpilot migrate` runs as admin; and
    the operations queries (`erpilot audit` reads the audit chain through the approval service)."""
    return Permissions(("$JS.API.>", f"$JS.{JS_DOMAIN}.API.>", *OPERATIONS_QUERIES), (), (f"{DEFAULT_INBOX}.>",))


def build_users(inboxes: Mapping[str, str] | None = None,
                apart: Mapping[tuple[str, str], str] | None = None) -> dict[str, Permissions]:
    inboxes = inboxes or service_inboxes()
    apart = apart_inboxes() if apart is None else apart
    users = {service: service_permissions(service, inboxes, apart) for service in SERVICES}
    return {**users, ADMIN: admin_permissions()}


def password_variable(user: str) -> str:
    return f"ERPILOT_NATS_{user.upper()}_PASSWORD"
