"""``signing_key_setting`` / ``verify_key_setting``: the one rule by which every service reads an Ed25519 key (the
grant, requester-assertion and ledger pairs): given, it must load; unset, only dev mode falls back to the service's
own development key file (``erpilot_platform.dev_keys``), and outside dev mode start-up stops with how to make one."""

from __future__ import annotations

import pytest

from erpilot_platform import dev_keys
from erpilot_platform.grants import encode_public_key, encode_signing_key, new_keypair_env
from erpilot_platform.settings import ConfigurationError, signing_key_setting, verify_key_setting

pytestmark = pytest.mark.unit
HINT = "`erpilot keygen` prints new pairs"


def _read(read, value, **kw):
    extra = {"service": "erp"} if read is verify_key_setting else {}
    return read(value, hint=HINT, stem="grant", **extra, **kw)


def test_a_given_key_is_used_and_the_data_dir_is_not_touched(tmp_path):
    keys = new_keypair_env("ERPILOT_TEST")
    private = _read(signing_key_setting, keys["ERPILOT_TEST_SIGNING_KEY"], variable="ERPILOT_TEST_SIGNING_KEY",
                    dev_mode=False, data_dir=tmp_path)
    public = _read(verify_key_setting, keys["ERPILOT_TEST_VERIFY_KEY"], variable="ERPILOT_TEST_VERIFY_KEY",
                   dev_mode=False, data_dir=tmp_path)
    assert encode_signing_key(private) == keys["ERPILOT_TEST_SIGNING_KEY"]
    assert encode_public_key(public) == keys["ERPILOT_TEST_VERIFY_KEY"] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("read", [signing_key_setting, verify_key_setting])
def test_outside_dev_mode_a_missing_key_stops_start_up_saying_how_to_make_one(tmp_path, read):
    with pytest.raises(ConfigurationError, match=f"ERPILOT_TEST_KEY is not set; {HINT}"):
        _read(read, None, variable="ERPILOT_TEST_KEY", dev_mode=False, data_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_in_dev_mode_each_half_comes_from_its_own_services_file(tmp_path):
    private = _read(signing_key_setting, None, variable="S", dev_mode=True, data_dir=tmp_path)
    public = _read(verify_key_setting, None, variable="V", dev_mode=True, data_dir=tmp_path)
    assert encode_public_key(public) == encode_public_key(private.public_key())
    assert (dev_keys.service_dir(tmp_path, "approval") / "grant_ed25519.key").exists()  # the signer's
    assert (dev_keys.service_dir(tmp_path, "erp") / "grant_ed25519.pub").exists()  # the verifier's copy


def test_a_service_that_does_not_verify_a_pair_gets_no_copy(tmp_path):
    with pytest.raises(ConfigurationError, match="gateway does not verify grant signatures"):
        verify_key_setting(None, variable="V", hint=HINT, stem="grant", service="gateway", dev_mode=True,
                           data_dir=tmp_path)


@pytest.mark.parametrize("read", [signing_key_setting, verify_key_setting])
def test_a_key_that_does_not_load_names_its_source(tmp_path, read):
    with pytest.raises(ConfigurationError, match="^ERPILOT_TEST_KEY: "):
        _read(read, "bm90IGEga2V5", variable="ERPILOT_TEST_KEY", dev_mode=True, data_dir=tmp_path)
    dev_keys.ensure(tmp_path)
    owner = "approval" if read is signing_key_setting else "erp"
    name = "grant_ed25519.key" if read is signing_key_setting else "grant_ed25519.pub"
    (dev_keys.service_dir(tmp_path, owner) / name).write_text("garbage")
    with pytest.raises(ConfigurationError, match="^grant key under "):
        _read(read, None, variable="ERPILOT_TEST_KEY", dev_mode=True, data_dir=tmp_path)
