"""The least-privilege NATS configuration generator (src/erpilot/stack/nats_security.py): the decision rules
of SPEC §8 hold in what it generates, it agrees with what the services really subscribe to, and the
committed deployment file is what it generates."""

from __future__ import annotations

import importlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from erpilot.stack import nats_config
from erpilot.stack import nats_credentials as nc
from erpilot.stack import nats_security as ns
from erpilot_contracts import subjects
from erpilot_contracts.subjects import ALL_STREAMS, PREFIX

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
USERS = ns.build_users()
ISOLATED = {service: f"_INBOX.{service}" for service in ns.SERVICES}


def test_subject_matching_follows_nats_wildcards():
    assert ns.covers("a.*.c", "a.b.c") and ns.covers("a.>", "a.b.c") and ns.covers("a.>", "a.*")
    assert not ns.covers("a.>", "a") and not ns.covers("a.*", "a.b.c") and not ns.covers("a.*", "a.>")
    assert not ns.covers("a.b", "a.*") and ns.covers("a.*", "a.*")


@pytest.mark.parametrize("subject", [subjects.APPROVAL_EVT_REQUESTED, subjects.APPROVAL_EVT_RESOLVED,
                                     "erpilot.v1.evt.approval.granted_in_some_future_version"])
def test_only_the_approval_service_publishes_approval_events(subject):
    publishers = [user for user, perms in USERS.items() if perms.may_publish(subject)]
    assert publishers == (["approval"] if subject.endswith(("requested", "resolved")) else [])
    for user in ("gateway", "agent", "erp"):  # a deny that no later allow can undo
        assert any(ns.covers(deny, "erpilot.v1.evt.approval.>") for deny in USERS[user].publish_deny), user


@pytest.mark.parametrize("subject", [subjects.APPROVAL_REQ_DECIDE, subjects.APPROVAL_CMD_DECIDE_MANY,
                                     subjects.APPROVAL_CMD_EDIT])
def test_only_the_gateway_sends_decisions(subject):
    assert [user for user, perms in USERS.items() if perms.may_publish(subject)] == ["gateway"]
    for user in ("agent", "approval", "erp"):
        assert subject in USERS[user].publish_deny, user


def test_nobody_sends_withdrawals_any_more_they_follow_the_agents_record_of_a_cancel():
    withdraw = "erpilot.v1.cmd.approval.withdraw"  # the subject the gateway used to send
    assert not hasattr(subjects, "APPROVAL_CMD_WITHDRAW")
    assert [user for user, perms in USERS.items() if perms.may_publish(withdraw)] in ([], ["admin"])


@pytest.mark.parametrize(("subject", "only"), [(subjects.APPROVAL_CMD_REQUEST, "erp"),
                                               (subjects.ERP_CMD_COMMIT, "approval")])
def test_only_the_ledger_asks_for_approval_and_only_the_approval_service_starts_a_commit(subject, only):
    """SPEC §10: what a person approves and who asked come from the ledger's record, and a commit follows only a
    decision; the agent (which runs the model) may send neither, whatever a later allow says."""
    assert [user for user, perms in USERS.items() if perms.may_publish(subject)] == [only]
    for user in ns.SERVICES:
        if user != only:
            assert subject in USERS[user].publish_deny, user


def test_only_the_gateway_watches_the_session_subjects_and_only_the_agent_publishes_there():
    events = subjects.session_events_subject("ses_1")
    assert [user for user, perms in USERS.items() if perms.may_subscribe(events)] == ["gateway"]
    assert [user for user, perms in USERS.items() if perms.may_publish(events)] == ["agent"]


def test_the_admin_publishes_nothing_but_the_jetstream_api_and_the_operations_queries():
    # `erpilot audit` reads the audit chain through the approval service, as the admin user (and no one else).
    assert all(p.startswith("$JS.") or p in ns.OPERATIONS_QUERIES for p in USERS[ns.ADMIN].publish_allow)
    assert ns.OPERATIONS_QUERIES == (subjects.APPROVAL_QUERY_AUDIT_CHAIN,)
    assert not any(USERS[service].may_publish(subjects.APPROVAL_QUERY_AUDIT_CHAIN) for service in ns.SERVICES)


@pytest.mark.parametrize("service", ns.SERVICES)
def test_no_service_may_create_destroy_or_reconfigure_a_stream_or_touch_others_consumers(service):
    perms = USERS[service]
    for stream in ALL_STREAMS:
        for verb in ("CREATE", "UPDATE", "DELETE", "PURGE", "MSG.DELETE"):
            assert not perms.may_publish(f"$JS.API.STREAM.{verb}.{stream.name}"), verb
        # Only reading a stream's configuration (start-up verification) is allowed.
        assert perms.may_publish(f"$JS.API.STREAM.INFO.{stream.name}") == ns.TRAFFIC[service].runs_service_app
    for other in ns.SERVICES:
        if other == service:
            continue
        for consumer in ns.consumers(other):
            for api in (f"$JS.API.CONSUMER.INFO.{consumer.stream}.{consumer.durable}",
                        f"$JS.API.CONSUMER.MSG.NEXT.{consumer.stream}.{consumer.durable}",
                        f"$JS.API.CONSUMER.CREATE.{consumer.stream}.{consumer.durable}.{consumer.subject}",
                        f"$JS.API.CONSUMER.DELETE.{consumer.stream}.{consumer.durable}",
                        f"$JS.ACK.{consumer.stream}.{consumer.durable}.1.2.3.4.5"):
                assert not perms.may_publish(api), (service, api)
        for query in ns.TRAFFIC[other].answers_queries:  # nobody else may answer another's queries
            assert not perms.may_subscribe(query), (service, query)


@pytest.mark.parametrize("service", ns.SERVICES)
def test_no_service_may_create_or_change_a_durable_consumer_not_even_its_own(service):
    perms = USERS[service]
    for consumer in ns.consumers(service):
        stream, durable = consumer.stream, consumer.durable
        assert perms.may_publish(f"$JS.API.CONSUMER.INFO.{stream}.{durable}")  # verified at start-up
        assert perms.may_publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}")
        for api in (f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.{consumer.subject}",
                    f"$JS.API.CONSUMER.CREATE.{stream}.{durable}",
                    f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
                    f"$JS.API.CONSUMER.DELETE.{stream}.{durable}"):
            assert not perms.may_publish(api), api
    for stream in ALL_STREAMS:
        assert not perms.may_publish(f"$JS.API.CONSUMER.CREATE.{stream.name}.anything.{PREFIX}.x")


def test_no_service_creates_a_consumer_not_even_an_ephemeral_one():
    """Session events are no stream's: the SSE stream replays from the agent's store (query.agent.events)."""
    for service in ns.SERVICES:
        for stream in ALL_STREAMS:
            assert not USERS[service].may_publish(f"$JS.API.CONSUMER.CREATE.{stream.name}"), service
        assert not USERS[service].may_publish("$JS.API.CONSUMER.CREATE.ERPILOT_SESSIONS"), service


def test_with_per_service_inboxes_no_service_reaches_another_services_inbox():
    users = ns.build_users(ISOLATED)
    assert ns.inboxes_isolated(ISOLATED) and not ns.inboxes_isolated({s: "_INBOX" for s in ns.SERVICES})
    agent = users["agent"]
    assert not agent.may_subscribe("_INBOX.>") and not agent.may_subscribe("_INBOX.approval.x")
    assert not agent.may_publish("_INBOX.approval.x.y") and not agent.may_publish("_INBOX.erp.x")
    assert agent.may_publish("_INBOX.gateway_from_agent.x")  # it answers the gateway's commands
    assert users["erp"].may_publish("_INBOX.approval.x") and not users["gateway"].may_publish("_INBOX.agent.x")
    assert not ns.inboxes_isolated(ISOLATED, {("gateway", "agent"): "_INBOX.gateway.agent"})  # inside the gateway's


def test_the_agent_may_answer_only_into_the_gateways_inboxes_apart_for_the_agent():
    """Issue 32: the agent sees the reply inboxes of the gateway's requests to it; it may publish there and to no
    other inbox of the gateway, so it cannot answer the gateway's requests to the approval service or the ERP (a
    forged "409 expired" to an approver whose decision was committed)."""
    from erpilot_platform.broker import create_broker

    agent, gateway = USERS["agent"], create_broker("nats://127.0.0.1:4222", "gateway")  # nothing connects
    asking_the_agent = gateway.apart["agent"]._connection_kwargs["inbox_prefix"]
    asking_the_others = gateway._connection_kwargs["inbox_prefix"]

    assert [p for p in agent.publish_allow if p.startswith("_INBOX")] == ["_INBOX.gateway_from_agent.>"]
    assert agent.may_publish(f"{asking_the_agent}.NUID") and agent.may_publish(f"{asking_the_agent}.NUID.tok")
    for inbox in (f"{asking_the_others}.NUID", f"{asking_the_others}.NUID.tok", "_INBOX.gateway.x"):
        assert not agent.may_publish(inbox), inbox
    assert all(USERS["gateway"].may_subscribe(f"{inbox}.>") for inbox in (asking_the_agent, asking_the_others))
    for other in ("approval", "erp"):  # they answer the gateway's requests to them, not those to the agent
        assert USERS[other].may_publish(f"{asking_the_others}.NUID")
        assert not USERS[other].may_publish(f"{asking_the_agent}.NUID"), other


def _app_subscriptions(service: str, monkeypatch, tmp_path) -> set[tuple]:
    monkeypatch.setenv("ERPILOT_DATABASE_URL", "postgresql://nobody@/nothing")  # nothing connects
    monkeypatch.setenv("ERPILOT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ERPILOT_DEV_MODE", "1")
    app_module = importlib.import_module(f"erpilot_{service}.app")
    settings_module = importlib.import_module(f"erpilot_{service}.settings")
    settings_class = next(getattr(settings_module, name) for name in dir(settings_module)
                          if name.lower() == f"{service}settings")
    app = app_module.build(settings_class())
    found = set()
    for sub in app.broker.subscribers:
        stream = getattr(sub, "stream", None)
        found.add((stream.name if stream else None, sub.subject.broker_address,
                   getattr(sub.config, "durable_name", None) if stream else sub.queue))
    return found


@pytest.mark.parametrize("service", ["erp", "approval", "agent"])
def test_the_permissions_follow_what_each_service_really_subscribes_to(service, monkeypatch, tmp_path):
    expected = {(c.stream, c.subject, c.durable) for c in ns.consumers(service)}
    expected |= {(None, subject, service) for subject in (*ns.TRAFFIC[service].answers_queries,
                                                          *ns.TRAFFIC[service].answers_requests)}
    assert _app_subscriptions(service, monkeypatch, tmp_path) == expected


def test_the_committed_deployment_configuration_is_current():
    committed = (ROOT / "deploy" / "nats-auth.conf").read_text()
    assert committed == nats_config.render(), "run `erpilot nats-config --out deploy/nats-auth.conf`"


def test_nats_server_accepts_the_configuration(tmp_path):
    from erpilot_platform.embedded import _nats_server_binary

    conf = tmp_path / "nats.conf"
    conf.write_text(f"jetstream {{ domain: {ns.JS_DOMAIN} }}\n" + nats_config.render())
    env = {**os.environ, **{ns.password_variable(user): f"pw-{user}" for user in ns.USERS}}
    result = subprocess.run([_nats_server_binary(), "-t", "-c", str(conf)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr + result.stdout


def test_passwords_are_random_private_and_kept(tmp_path):
    first = nc.load_or_create_passwords(tmp_path)
    assert set(first) == set(ns.USERS) and len(set(first.values())) == len(ns.USERS)
    assert stat.S_IMODE((tmp_path / nc.PASSWORDS_FILE).stat().st_mode) == 0o600
    assert nc.load_or_create_passwords(tmp_path) == first
    credentials = nc.service_credentials(first)
    assert credentials["agent"] == {"ERPILOT_NATS_USER": "agent", "ERPILOT_NATS_PASSWORD": first["agent"]}
    assert ns.ADMIN not in credentials


def test_docker_compose_runs_nats_with_these_users_and_gives_each_service_its_own(tmp_path):
    yaml = pytest.importorskip("yaml")
    from erpilot_platform.embedded import _nats_server_binary

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    configs = {c["source"]: c["target"] for c in compose["services"]["nats"]["configs"]}
    assert configs["nats_auth"] == "/etc/nats/nats-auth.conf"
    assert compose["configs"]["nats_auth"]["file"] == "./deploy/nats-auth.conf"
    main = compose["configs"]["nats_conf"]["content"]
    assert f"domain: {ns.JS_DOMAIN}" in main and 'include "nats-auth.conf"' in main
    (tmp_path / "nats.conf").write_text(main.replace("/data", str(tmp_path / "data")))
    (tmp_path / "nats-auth.conf").write_text((ROOT / "deploy" / "nats-auth.conf").read_text())
    env = {**os.environ, **{ns.password_variable(user): f"pw-{user}" for user in ns.USERS}}
    result = subprocess.run([_nats_server_binary(), "-t", "-c", str(tmp_path / "nats.conf")],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr + result.stdout

    nats_env = compose["services"]["nats"]["environment"]
    for user in ns.USERS:
        assert ns.password_variable(user) in nats_env
    for service in ns.SERVICES:
        environment = compose["services"][service]["environment"]
        assert environment["ERPILOT_NATS_USER"] == service
        assert environment["ERPILOT_NATS_PASSWORD"].startswith("${" + ns.password_variable(service) + ":")
    migrate = compose["services"]["migrate"]["environment"]
    assert migrate["ERPILOT_NATS_USER"] == ns.ADMIN
    assert migrate["ERPILOT_NATS_PASSWORD"].startswith("${" + ns.password_variable(ns.ADMIN) + ":")


def test_the_agent_may_prepare_and_draft_but_neither_request_an_approval_nor_commit():
    """Issue 25: the ledger asks for the approval, the approval service sends the commit."""
    agent = USERS["agent"]
    assert agent.may_publish(subjects.ERP_CMD_PREPARE) and agent.may_publish(subjects.ERP_REQ_DRAFT)
    assert not agent.may_publish(subjects.APPROVAL_CMD_REQUEST) and not agent.may_publish(subjects.ERP_CMD_COMMIT)
