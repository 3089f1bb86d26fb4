"""Keys and secrets reach only the service that needs them (issue 10, item 4).

Outside dev mode the approval service and the ERP do not start without their grant keys; under a
stack (``erpilot up``, the e2e stack) the signing key and the JWT secret never reach the agent, neither
in its environment nor in a directory it is given. Issue 26: each service gets only its own keys, the
development keys are a file per service, kept across restarts, and ``erpilot keygen`` prints every pair. Issue 25:
the ledger key (the ERP signs its approval requests, the approval service verifies them) is a third pair, alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from erpilot import cli
from erpilot.stack.stack import Stack
from erpilot_approval.settings import ApprovalSettings
from erpilot_erp.settings import ErpSettings
from erpilot_gateway.settings import GatewaySettings
from erpilot_platform import dev_keys
from erpilot_platform.grants import encode_public_key, load_signing_key, new_keypair_env
from erpilot_platform.settings import ConfigurationError

pytestmark = pytest.mark.unit
DB = "postgresql://nobody@/nothing"
KEY_VARIABLES = {"ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_GRANT_VERIFY_KEY", "ERPILOT_ASSERTION_SIGNING_KEY",
                 "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_SIGNING_KEY", "ERPILOT_LEDGER_VERIFY_KEY"}


@pytest.fixture(autouse=True)
def _no_keys_in_the_environment(monkeypatch) -> None:
    for name in (*KEY_VARIABLES, "ERPILOT_DEV_MODE"):
        monkeypatch.delenv(name, raising=False)


def test_outside_dev_mode_approval_and_erp_refuse_to_start_without_their_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="ERPILOT_GRANT_SIGNING_KEY is not set.*erpilot keygen"):
        ApprovalSettings(database_url=DB, data_dir=tmp_path).signing_key()
    with pytest.raises(ConfigurationError, match="ERPILOT_GRANT_VERIFY_KEY is not set"):
        ErpSettings(database_url=DB, data_dir=tmp_path).grant_key()
    assert list(tmp_path.iterdir()) == []  # no key pair was generated into the data directory

    keys = new_keypair_env()
    signing = ApprovalSettings(database_url=DB, grant_signing_key=keys["ERPILOT_GRANT_SIGNING_KEY"]).signing_key()
    verify = ErpSettings(database_url=DB, grant_verify_key=keys["ERPILOT_GRANT_VERIFY_KEY"]).grant_key()
    assert encode_public_key(signing.public_key()) == encode_public_key(verify) == keys["ERPILOT_GRANT_VERIFY_KEY"]


def test_outside_dev_mode_the_gateway_and_the_erp_refuse_to_start_without_their_assertion_keys(
        tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="ERPILOT_ASSERTION_SIGNING_KEY is not set.*erpilot keygen"):
        GatewaySettings(auth_secret="s" * 40, data_dir=tmp_path).assertion_key()
    with pytest.raises(ConfigurationError, match="ERPILOT_ASSERTION_VERIFY_KEY is not set"):
        ErpSettings(database_url=DB, data_dir=tmp_path).assertion_key()
    with pytest.raises(ConfigurationError, match="ERPILOT_ASSERTION_VERIFY_KEY is not set"):
        ApprovalSettings(database_url=DB, data_dir=tmp_path).assertion_key()
    assert list(tmp_path.iterdir()) == []

    keys = new_keypair_env("ERPILOT_ASSERTION")
    signing = GatewaySettings(auth_secret="s" * 40,
                              assertion_signing_key=keys["ERPILOT_ASSERTION_SIGNING_KEY"]).assertion_key()
    verify = ErpSettings(database_url=DB, assertion_verify_key=keys["ERPILOT_ASSERTION_VERIFY_KEY"]).assertion_key()
    also = ApprovalSettings(database_url=DB, assertion_verify_key=keys["ERPILOT_ASSERTION_VERIFY_KEY"]).assertion_key()
    assert encode_public_key(signing.public_key()) == encode_public_key(verify) == encode_public_key(also)
    with pytest.raises(ConfigurationError, match="ERPILOT_ASSERTION_VERIFY_KEY"):
        ErpSettings(database_url=DB, assertion_verify_key="bm90IGEga2V5").assertion_key()


def test_outside_dev_mode_the_erp_and_the_approval_service_refuse_to_start_without_their_ledger_keys(
        tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="ERPILOT_LEDGER_SIGNING_KEY is not set.*erpilot keygen"):
        ErpSettings(database_url=DB, data_dir=tmp_path).ledger_key()
    with pytest.raises(ConfigurationError, match="ERPILOT_LEDGER_VERIFY_KEY is not set.*erpilot keygen"):
        ApprovalSettings(database_url=DB, data_dir=tmp_path).ledger_key()
    assert list(tmp_path.iterdir()) == []  # nothing generated into the data directory

    keys = new_keypair_env("ERPILOT_LEDGER")
    signing = ErpSettings(database_url=DB, ledger_signing_key=keys["ERPILOT_LEDGER_SIGNING_KEY"]).ledger_key()
    verify = ApprovalSettings(database_url=DB, ledger_verify_key=keys["ERPILOT_LEDGER_VERIFY_KEY"]).ledger_key()
    assert encode_public_key(signing.public_key()) == encode_public_key(verify) == keys["ERPILOT_LEDGER_VERIFY_KEY"]
    with pytest.raises(ConfigurationError, match="ERPILOT_LEDGER_SIGNING_KEY"):
        ErpSettings(database_url=DB, ledger_signing_key="bm90IGEga2V5").ledger_key()
    with pytest.raises(ConfigurationError, match="ERPILOT_LEDGER_VERIFY_KEY"):
        ApprovalSettings(database_url=DB, ledger_verify_key="not base64!").ledger_key()


def test_in_dev_mode_the_erp_and_the_approval_service_agree_on_one_ledger_pair_in_their_own_files(
        tmp_path: Path) -> None:
    signing = ErpSettings(database_url=DB, data_dir=tmp_path, dev_mode=True).ledger_key()
    verify = ApprovalSettings(database_url=DB, data_dir=tmp_path, dev_mode=True).ledger_key()
    assert encode_public_key(signing.public_key()) == encode_public_key(verify)
    assert (dev_keys.service_dir(tmp_path, "erp") / "ledger_ed25519.key").exists()
    assert not (dev_keys.service_dir(tmp_path, "approval") / "ledger_ed25519.key").exists()
    assert (dev_keys.service_dir(tmp_path, "approval") / "ledger_ed25519.pub").exists()


def test_in_dev_mode_the_gateway_and_the_erp_sharing_a_data_dir_agree_on_one_assertion_pair(tmp_path: Path) -> None:
    signing = GatewaySettings(auth_secret="s" * 40, data_dir=tmp_path, dev_mode=True).assertion_key()
    verify = ErpSettings(database_url=DB, data_dir=tmp_path, dev_mode=True).assertion_key()
    assert encode_public_key(signing.public_key()) == encode_public_key(verify)
    assert (dev_keys.service_dir(tmp_path, "gateway") / "assertion_ed25519.key").exists()
    assert [path.name for path in tmp_path.iterdir()] == ["keys"]  # no pair in the shared data dir


def test_in_dev_mode_processes_sharing_a_data_dir_agree_on_one_pair(tmp_path: Path) -> None:
    signing = ApprovalSettings(database_url=DB, data_dir=tmp_path, dev_mode=True).signing_key()
    verify = ErpSettings(database_url=DB, data_dir=tmp_path, dev_mode=True).grant_key()
    assert encode_public_key(signing.public_key()) == encode_public_key(verify)


# Which key variables each service may hold: its own half of each pair it signs or verifies with.
OWN_KEYS = {"agent": set(),
            "approval": {"ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_VERIFY_KEY"},
            "erp": {"ERPILOT_GRANT_VERIFY_KEY", "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_SIGNING_KEY"},
            "gateway": {"ERPILOT_ASSERTION_SIGNING_KEY"}}


def keys_in(env: dict[str, str]) -> set[str]:
    return set(env) & KEY_VARIABLES


def test_each_service_gets_only_its_own_keys_and_only_the_gateway_the_jwt_secret(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    # As `erpilot up` composes it with your keys: the caller's shell holds every secret.
    keys = {**new_keypair_env("ERPILOT_GRANT"), **new_keypair_env("ERPILOT_ASSERTION"),
            **new_keypair_env("ERPILOT_LEDGER")}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ERPILOT_NATS_APPROVAL_PASSWORD", "approval-secret")
    stack = Stack("nats://127.0.0.1:1", DB, tmp_path, env={"ERPILOT_DEV_MODE": "1", "ERPILOT_AUTH_SECRET": "s" * 40})

    envs = {service: stack.env_for(service) for service in ("agent", "approval", "erp", "gateway")}
    for service, (env, withheld) in envs.items():
        assert keys_in(env) == OWN_KEYS[service], service
        assert {name: env[name] for name in keys_in(env)} == {name: keys[name] for name in OWN_KEYS[service]}
        assert KEY_VARIABLES - OWN_KEYS[service] <= set(withheld), service  # removed from what it inherits, too
    agent_env, agent_withheld = envs["agent"]
    assert {"ERPILOT_AUTH_SECRET", "ERPILOT_NATS_APPROVAL_PASSWORD"} <= set(agent_withheld)
    assert envs["gateway"][0]["ERPILOT_AUTH_SECRET"] == "s" * 40
    assert "ERPILOT_AUTH_SECRET" not in envs["approval"][0]
    assert not (tmp_path / "keys").exists()  # keys given: no development key is made

    # Given only a signing key, its owner's partners get the verify key derived from it.
    monkeypatch.delenv("ERPILOT_GRANT_VERIFY_KEY")
    assert Stack("nats://127.0.0.1:1", DB, tmp_path).env_for("erp")[0]["ERPILOT_GRANT_VERIFY_KEY"] == \
        keys["ERPILOT_GRANT_VERIFY_KEY"]


def test_a_stack_without_keys_hands_each_service_its_own_development_key_files_kept_across_restarts(
        tmp_path: Path) -> None:
    stack = Stack("nats://127.0.0.1:1", DB, tmp_path, env={"ERPILOT_AUTH_SECRET": "s" * 40})
    envs = {service: stack.env_for(service)[0] for service in ("agent", "approval", "erp", "gateway")}

    for service, env in envs.items():
        assert keys_in(env) == OWN_KEYS[service], service
        assert {name: env[name] for name in keys_in(env)} == dev_keys.service_env(tmp_path, service)
    signing = load_signing_key(envs["approval"]["ERPILOT_GRANT_SIGNING_KEY"])
    assert encode_public_key(signing.public_key()) == envs["erp"]["ERPILOT_GRANT_VERIFY_KEY"]
    signing = load_signing_key(envs["gateway"]["ERPILOT_ASSERTION_SIGNING_KEY"])
    assert encode_public_key(signing.public_key()) == envs["erp"]["ERPILOT_ASSERTION_VERIFY_KEY"] == \
        envs["approval"]["ERPILOT_ASSERTION_VERIFY_KEY"]
    signing = load_signing_key(envs["erp"]["ERPILOT_LEDGER_SIGNING_KEY"])
    assert encode_public_key(signing.public_key()) == envs["approval"]["ERPILOT_LEDGER_VERIFY_KEY"]
    # The files are in keys/<service>/; each service's own data dir (the only directory it is given) has none.
    assert sorted(path.name for path in (tmp_path / "keys").iterdir()) == ["approval", "erp", "gateway"]
    for service, env in envs.items():
        assert Path(env["ERPILOT_DATA_DIR"]) == tmp_path / "services" / service
        assert str(tmp_path / "keys") not in " ".join(env.values())

    # A restart (a new Stack on the same data dir): the same keys, so what an outbox still holds verifies.
    again = Stack("nats://127.0.0.1:1", DB, tmp_path, env={"ERPILOT_AUTH_SECRET": "s" * 40})
    assert {service: again.env_for(service)[0] for service in envs} == envs


def test_keygen_prints_the_three_pairs_as_the_six_variables(capsys) -> None:
    cli.main(["keygen"])
    lines = capsys.readouterr().out.splitlines()

    exports = dict(line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export "))
    assert list(exports) == ["ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_GRANT_VERIFY_KEY", "ERPILOT_ASSERTION_SIGNING_KEY",
                             "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_SIGNING_KEY", "ERPILOT_LEDGER_VERIFY_KEY"]
    assert all(line.startswith(("export ", "# ")) for line in lines)  # `eval "$(erpilot keygen)"` sets all six
    for prefix in ("ERPILOT_GRANT", "ERPILOT_ASSERTION", "ERPILOT_LEDGER"):
        signing = load_signing_key(exports[f"{prefix}_SIGNING_KEY"])
        assert encode_public_key(signing.public_key()) == exports[f"{prefix}_VERIFY_KEY"]
    signing_keys = [exports[f"{prefix}_SIGNING_KEY"] for prefix in ("ERPILOT_GRANT", "ERPILOT_ASSERTION",
                                                                    "ERPILOT_LEDGER")]
    assert len(set(signing_keys)) == 3  # three pairs, not one
    # What each service needs to start outside dev mode, from keygen's output alone.
    signing = ApprovalSettings(database_url=DB, grant_signing_key=exports["ERPILOT_GRANT_SIGNING_KEY"],
                               assertion_verify_key=exports["ERPILOT_ASSERTION_VERIFY_KEY"],
                               ledger_verify_key=exports["ERPILOT_LEDGER_VERIFY_KEY"])
    erp = ErpSettings(database_url=DB, grant_verify_key=exports["ERPILOT_GRANT_VERIFY_KEY"],
                      assertion_verify_key=exports["ERPILOT_ASSERTION_VERIFY_KEY"],
                      ledger_signing_key=exports["ERPILOT_LEDGER_SIGNING_KEY"])
    gateway = GatewaySettings(auth_secret="s" * 40, assertion_signing_key=exports["ERPILOT_ASSERTION_SIGNING_KEY"])
    assert encode_public_key(signing.signing_key().public_key()) == encode_public_key(erp.grant_key())
    assert encode_public_key(gateway.assertion_key().public_key()) == encode_public_key(erp.assertion_key()) == \
        encode_public_key(signing.assertion_key())
    assert encode_public_key(erp.ledger_key().public_key()) == encode_public_key(signing.ledger_key())


def test_email_links_verify_only_when_minted_with_the_key_the_approval_service_derives_from_its_grant_key() -> None:
    """Issue 34: a link decides as its person, so only the approval service (which mails it) can make one: its
    key derives from the grant signing key, which no other service holds; the gateway's keys make no link."""
    from datetime import UTC, datetime

    from erpilot_approval.domain.links import Link, LinkError, link_key, mint, verify

    grant = new_keypair_env()
    assertion = new_keypair_env("ERPILOT_ASSERTION")
    approval_key = link_key(ApprovalSettings(database_url=DB, grant_signing_key=grant["ERPILOT_GRANT_SIGNING_KEY"])
                            .signing_key())
    gateway = GatewaySettings(auth_secret="s" * 40, assertion_signing_key=assertion["ERPILOT_ASSERTION_SIGNING_KEY"])
    link = Link(pending_id="pa-1", sub="bob", action="approve", fingerprint="sha256:" + "1" * 64,
                expires_at=datetime(2030, 1, 1, tzinfo=UTC))

    assert verify(approval_key, mint(approval_key, link), "pa-1") == link
    for other in (link_key(gateway.assertion_key()), gateway.auth_secret.encode()):
        with pytest.raises(LinkError, match="not valid"):
            verify(approval_key, mint(other, link), "pa-1")


def test_only_the_approval_service_gets_the_chat_signing_secret(tmp_path: Path, monkeypatch) -> None:
    """Issue 34: the chat card's callbacks are checked by the approval service alone; the gateway passes them on
    unread, and the agent could press any button as any mapped chat user with the secret."""
    monkeypatch.setenv("ERPILOT_CHAT_SIGNING_SECRET", "chat-secret-0123456789")
    stack = Stack("nats://127.0.0.1:1", DB, tmp_path, env={"ERPILOT_DEV_MODE": "1", "ERPILOT_AUTH_SECRET": "s" * 40})

    for service in ("agent", "erp", "gateway"):
        env, withheld = stack.env_for(service)
        assert "ERPILOT_CHAT_SIGNING_SECRET" not in env and "ERPILOT_CHAT_SIGNING_SECRET" in withheld, service
    assert "ERPILOT_CHAT_SIGNING_SECRET" not in stack.env_for("approval")[1]  # it inherits it from the shell
