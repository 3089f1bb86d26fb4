"""The requester assertions' verify key reaches the approval service as the grant key does: from
ERPILOT_ASSERTION_VERIFY_KEY, or in dev mode only from its development key file (keys/approval); outside dev mode a
missing key stops start-up (a service that cannot tell a forged requester must not run)."""

from __future__ import annotations

import pytest

from erpilot_approval.settings import ApprovalSettings
from erpilot_platform import dev_keys
from erpilot_platform.grants import encode_public_key, new_keypair_env
from erpilot_platform.settings import ConfigurationError

pytestmark = pytest.mark.unit
DB = "postgresql://nobody@/nothing"


@pytest.fixture(autouse=True)
def _no_keys_in_the_environment(monkeypatch) -> None:
    for name in ("ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_DEV_MODE"):
        monkeypatch.delenv(name, raising=False)


def test_outside_dev_mode_the_assertion_key_must_be_given(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="ERPILOT_ASSERTION_VERIFY_KEY is not set"):
        ApprovalSettings(database_url=DB, data_dir=tmp_path).assertion_key()
    assert list(tmp_path.iterdir()) == []  # nothing generated

    keys = new_keypair_env("ERPILOT_ASSERTION")
    given = ApprovalSettings(database_url=DB, assertion_verify_key=keys["ERPILOT_ASSERTION_VERIFY_KEY"])
    assert encode_public_key(given.assertion_key()) == keys["ERPILOT_ASSERTION_VERIFY_KEY"]
    with pytest.raises(ConfigurationError, match="ERPILOT_ASSERTION_VERIFY_KEY"):
        ApprovalSettings(database_url=DB, assertion_verify_key="not base64!").assertion_key()


def test_in_dev_mode_it_is_the_public_half_of_the_data_dirs_assertion_pair(tmp_path) -> None:
    key = ApprovalSettings(database_url=DB, data_dir=tmp_path, dev_mode=True).assertion_key()
    signing = dev_keys.signing_key(tmp_path, "assertion")  # what the gateway signs with in dev mode
    assert encode_public_key(key) == encode_public_key(signing.public_key())
    assert (dev_keys.service_dir(tmp_path, "approval") / "assertion_ed25519.pub").exists()


def test_the_people_directory_is_the_policys_people_overlaid_with_erpilot_role_source(tmp_path, monkeypatch) -> None:
    policy_file, roles = tmp_path / "policy.toml", tmp_path / "roles.toml"
    policy_file.write_text('[people.bob]\nroles = ["manager"]\n[people.cy]\nroles = ["approver"]\n')
    roles.write_text('[people.bob]\nroles = ["requester"]\n')
    monkeypatch.setenv("ERPILOT_ROLE_SOURCE", str(roles))
    settings = ApprovalSettings(database_url=DB, policy=policy_file)

    people = settings.people(settings.load_policy())
    assert people() == {"bob": ("requester",), "cy": ("approver",)}
    neither = ApprovalSettings(database_url=DB, role_source=None)
    assert neither.people(neither.load_policy())() is None  # the recorded roles stand (delegation.answerable)

    roles.write_text("not toml [")
    with pytest.raises(ConfigurationError, match="ERPILOT_ROLE_SOURCE"):  # at start-up a broken file stops it
        settings.people(settings.load_policy())
