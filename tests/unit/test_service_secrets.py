"""Keys and secrets reach only the service that needs them (issue 10, item 4).

Outside dev mode the approval service and the ERP do not start without their grant keys; under a
stack (``erpilot up``, the e2e stack) the signing key and the JWT secret never reach the agent, neither
in its environment nor in a directory it is given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from erpilot.stack.stack import Stack
from erpilot.stack.up import dev_grant_keys
from erpilot_approval.settings import ApprovalSettings
from erpilot_erp.settings import ErpSettings
from erpilot_gateway.settings import GatewaySettings
from erpilot_platform.grants import PRIVATE_KEY_FILE, encode_public_key, new_keypair_env
from erpilot_platform.settings import ConfigurationError

pytestmark = pytest.mark.unit
DB = "postgresql://nobody@/nothing"


@pytest.fixture(autouse=True)
def _no_keys_in_the_environment(monkeypatch) -> None:
    for name in ("ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_GRANT_VERIFY_KEY", "ERPILOT_ASSERTION_SIGNING_KEY",
                 "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_DEV_MODE"):
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


def test_in_dev_mode_the_gateway_and_the_erp_sharing_a_data_dir_agree_on_one_assertion_pair(tmp_path: Path) -> None:
    signing = GatewaySettings(auth_secret="s" * 40, data_dir=tmp_path, dev_mode=True).assertion_key()
    verify = ErpSettings(database_url=DB, data_dir=tmp_path, dev_mode=True).assertion_key()
    assert encode_public_key(signing.public_key()) == encode_public_key(verify)
    assert (tmp_path / "assertion_ed25519.key").exists() and not (tmp_path / PRIVATE_KEY_FILE).exists()


def test_in_dev_mode_processes_sharing_a_data_dir_agree_on_one_pair(tmp_path: Path) -> None:
    signing = ApprovalSettings(database_url=DB, data_dir=tmp_path, dev_mode=True).signing_key()
    verify = ErpSettings(database_url=DB, data_dir=tmp_path, dev_mode=True).grant_key()
    assert encode_public_key(signing.public_key()) == encode_public_key(verify)


def test_only_the_approval_gets_the_signing_key_and_only_the_gateway_the_jwt_secret(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    # As `erpilot up` composes it: the data dir's pair, and the caller's shell holding every secret.
    keys = dev_grant_keys(tmp_path)
    monkeypatch.setenv("ERPILOT_GRANT_SIGNING_KEY", keys["ERPILOT_GRANT_SIGNING_KEY"])
    monkeypatch.setenv("ERPILOT_NATS_APPROVAL_PASSWORD", "approval-secret")
    stack = Stack("nats://127.0.0.1:1", DB, tmp_path, env={
        "ERPILOT_DEV_MODE": "1", "ERPILOT_AUTH_SECRET": "s" * 40, **keys})

    envs = {service: stack.env_for(service) for service in ("agent", "approval", "erp", "gateway")}
    agent_env, agent_withheld = envs["agent"]
    assert {"ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_AUTH_SECRET", "ERPILOT_NATS_APPROVAL_PASSWORD"} <= set(
        agent_withheld)  # removed from what the child inherits, too
    assert not {"ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_AUTH_SECRET"} & set(agent_env)
    assert envs["approval"][0]["ERPILOT_GRANT_SIGNING_KEY"] == keys["ERPILOT_GRANT_SIGNING_KEY"]
    assert "ERPILOT_GRANT_SIGNING_KEY" not in envs["erp"][0] and "ERPILOT_GRANT_VERIFY_KEY" in envs["erp"][0]
    assert envs["gateway"][0]["ERPILOT_AUTH_SECRET"] == "s" * 40
    assert "ERPILOT_AUTH_SECRET" not in envs["approval"][0]
    # The requester assertions: only the gateway signs; the ERP and the approval service verify.
    assert [service for service, (env, _) in envs.items() if "ERPILOT_ASSERTION_SIGNING_KEY" in env] == ["gateway"]
    assert "ERPILOT_ASSERTION_SIGNING_KEY" in agent_withheld
    assert all(envs[service][0]["ERPILOT_ASSERTION_VERIFY_KEY"] for service in ("erp", "approval"))

    # The key files stay in the stack's data dir; the agent is given a directory of its own below it.
    agent_dir = Path(agent_env["ERPILOT_DATA_DIR"])
    assert (tmp_path / PRIVATE_KEY_FILE).exists()
    assert agent_dir == tmp_path / "services" / "agent" and not (agent_dir / PRIVATE_KEY_FILE).exists()


def test_a_stack_without_keys_gets_a_fresh_pair_of_its_own(tmp_path: Path) -> None:
    stack = Stack("nats://127.0.0.1:1", DB, tmp_path, env={"ERPILOT_AUTH_SECRET": "s" * 40})
    approval, erp, gateway = stack.env_for("approval")[0], stack.env_for("erp")[0], stack.env_for("gateway")[0]
    assert approval["ERPILOT_GRANT_SIGNING_KEY"] and erp["ERPILOT_GRANT_VERIFY_KEY"]
    assert gateway["ERPILOT_ASSERTION_SIGNING_KEY"] and erp["ERPILOT_ASSERTION_VERIFY_KEY"]
    assert list(tmp_path.iterdir()) == []
