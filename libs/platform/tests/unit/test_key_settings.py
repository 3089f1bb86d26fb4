"""``signing_key_setting`` / ``verify_key_setting``: the one rule by which every service reads an Ed25519 key (the
grant pair, the requester-assertion pair): given, it must load; unset, only dev mode falls back to the data dir's
pair, and outside dev mode start-up stops with how to make one."""

from __future__ import annotations

import pytest

from erpilot_platform.grants import encode_public_key, encode_signing_key, ensure_keypair, new_keypair_env
from erpilot_platform.settings import ConfigurationError, signing_key_setting, verify_key_setting

pytestmark = pytest.mark.unit
HINT = "`erpilot keygen` prints a new pair"


def test_a_given_key_is_used_and_the_data_dir_is_not_touched(tmp_path):
    keys = new_keypair_env("ERPILOT_TEST")
    private = signing_key_setting(keys["ERPILOT_TEST_SIGNING_KEY"], variable="ERPILOT_TEST_SIGNING_KEY", hint=HINT,
                                  stem="test", dev_mode=False, data_dir=tmp_path)
    public = verify_key_setting(keys["ERPILOT_TEST_VERIFY_KEY"], variable="ERPILOT_TEST_VERIFY_KEY", hint=HINT,
                                stem="test", dev_mode=False, data_dir=tmp_path)
    assert encode_signing_key(private) == keys["ERPILOT_TEST_SIGNING_KEY"]
    assert encode_public_key(public) == keys["ERPILOT_TEST_VERIFY_KEY"] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("read", [signing_key_setting, verify_key_setting])
def test_outside_dev_mode_a_missing_key_stops_start_up_saying_how_to_make_one(tmp_path, read):
    with pytest.raises(ConfigurationError, match=f"ERPILOT_TEST_KEY is not set; {HINT}"):
        read(None, variable="ERPILOT_TEST_KEY", hint=HINT, stem="test", dev_mode=False, data_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_in_dev_mode_both_halves_come_from_one_pair_under_the_data_dir(tmp_path):
    private = signing_key_setting(None, variable="S", hint=HINT, stem="test", dev_mode=True, data_dir=tmp_path)
    public = verify_key_setting(None, variable="V", hint=HINT, stem="test", dev_mode=True, data_dir=tmp_path)
    assert encode_public_key(public) == encode_public_key(private.public_key())
    assert encode_public_key(ensure_keypair(tmp_path, stem="test")[1]) == encode_public_key(public)


@pytest.mark.parametrize("read", [signing_key_setting, verify_key_setting])
def test_a_key_that_does_not_load_names_its_source(tmp_path, read):
    with pytest.raises(ConfigurationError, match="^ERPILOT_TEST_KEY: "):
        read("bm90IGEga2V5", variable="ERPILOT_TEST_KEY", hint=HINT, stem="test", dev_mode=True, data_dir=tmp_path)
    (tmp_path / "test_ed25519.key").write_text("garbage")
    with pytest.raises(ConfigurationError, match="^test key under "):
        read(None, variable="ERPILOT_TEST_KEY", hint=HINT, stem="test", dev_mode=True, data_dir=tmp_path)
