"""The development key files (issue 26): a file per service that needs a key, mode 0600 for a private key, in a
0700 directory of that service's own; created once and kept; one set of pairs under concurrency; an older data
dir's shared pair adopted and removed from where everyone could read it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_contracts.approval.v1 import GrantV1, RequestApprovalV1
from erpilot_platform import dev_keys
from erpilot_platform.assertions import sign_assertion, verify_assertion
from erpilot_platform.grants import encode_public_key, encode_signing_key, sign_grant, verify_grant
from erpilot_platform.ledger_signatures import sign_request, verify_request

pytestmark = pytest.mark.unit

# What each service's directory holds, and nothing else (the agent: no directory at all).
EXPECTED = {
    "approval": {"grant_ed25519.key": 0o600, "assertion_ed25519.pub": 0o644, "ledger_ed25519.pub": 0o644},
    "erp": {"grant_ed25519.pub": 0o644, "assertion_ed25519.pub": 0o644, "ledger_ed25519.key": 0o600},
    "gateway": {"assertion_ed25519.key": 0o600},
}
GRANT = GrantV1(pending_id="pa-1", operation_id="op-1", fingerprint="sha256:" + "ab" * 32, decided_by="bob",
                decided_at=datetime(2026, 10, 19, 12, 0, tzinfo=UTC))
REQUEST = RequestApprovalV1(call_id="call-1", session_id="ses_1", tool="adjust_stock", operation_id="op-1",
                            arguments={"sku": "SKU-1", "delta": 1, "reason": "count"},
                            fingerprint="sha256:" + "cd" * 32, requested_by="alice",
                            preview={"operation": "Adjust stock", "object": "SKU-1", "target": "SKU-1"})


def layout(data_dir: Path) -> dict[str, dict[str, int]]:
    """service -> {file: mode} under keys/, as `ls -l` would show it."""
    root = data_dir / dev_keys.KEYS_DIR
    return {service.name: {path.name: stat.S_IMODE(path.stat().st_mode) for path in service.iterdir()}
            for service in root.iterdir()}


def test_each_service_gets_a_directory_of_its_own_keys_private_ones_0600(tmp_path: Path) -> None:
    dev_keys.ensure(tmp_path)

    assert layout(tmp_path) == EXPECTED
    assert {service: dev_keys.files_of(service) for service in ("approval", "erp", "gateway", "agent")} == {
        **EXPECTED, "agent": {}}
    root = tmp_path / dev_keys.KEYS_DIR
    for directory in (root, *root.iterdir()):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
        assert directory.stat().st_uid == os.getuid()
    for path in root.rglob("*"):
        assert path.stat().st_uid == os.getuid(), path
    assert [path.name for path in tmp_path.iterdir()] == ["keys"]  # nothing left in the shared data dir


def test_the_halves_in_different_directories_are_one_pair_and_each_service_reads_only_its_own(
        tmp_path: Path) -> None:
    signer = dev_keys.signing_key(tmp_path, "grant")  # created on first use
    assert verify_grant(sign_grant(GRANT, signer), dev_keys.verify_key(tmp_path, "grant", "erp"))
    token = sign_assertion(dev_keys.signing_key(tmp_path, "assertion"), sub="alice", roles=["requester"],
                           session_id="ses_1", call_id="call_1", tool="get_product")
    for verifier in ("erp", "approval"):
        assert verify_assertion(token, dev_keys.verify_key(tmp_path, "assertion", verifier), session_id="ses_1",
                                call_id="call_1", tool="get_product").sub == "alice"
    assert verify_request(sign_request(REQUEST, dev_keys.signing_key(tmp_path, "ledger")),
                          dev_keys.verify_key(tmp_path, "ledger", "approval"))
    with pytest.raises(ValueError, match="does not verify"):
        dev_keys.verify_key(tmp_path, "grant", "gateway")
    with pytest.raises(ValueError, match="does not verify"):
        dev_keys.verify_key(tmp_path, "ledger", "agent")

    envs = {service: dev_keys.service_env(tmp_path, service) for service in ("approval", "erp", "gateway", "agent")}
    assert {service: sorted(env) for service, env in envs.items()} == {
        "approval": ["ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_LEDGER_VERIFY_KEY"],
        "erp": ["ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_GRANT_VERIFY_KEY", "ERPILOT_LEDGER_SIGNING_KEY"],
        "gateway": ["ERPILOT_ASSERTION_SIGNING_KEY"],
        "agent": []}
    assert envs["approval"]["ERPILOT_GRANT_SIGNING_KEY"] == encode_signing_key(signer)
    assert envs["erp"]["ERPILOT_LEDGER_SIGNING_KEY"] == encode_signing_key(dev_keys.signing_key(tmp_path, "ledger"))


def test_created_once_then_kept(tmp_path: Path) -> None:
    dev_keys.ensure(tmp_path)
    first = {service: dev_keys.service_env(tmp_path, service) for service in ("approval", "erp", "gateway")}
    contents = {path: path.read_bytes() for path in (tmp_path / "keys").rglob("*") if path.is_file()}

    dev_keys.ensure(tmp_path)  # a second start

    assert {service: dev_keys.service_env(tmp_path, service) for service in ("approval", "erp", "gateway")} == first
    assert {path: path.read_bytes() for path in (tmp_path / "keys").rglob("*") if path.is_file()} == contents


def test_a_wider_directory_is_narrowed_and_a_lost_or_mismatched_key_is_refused(tmp_path: Path) -> None:
    dev_keys.ensure(tmp_path)
    gateway_dir = dev_keys.service_dir(tmp_path, "gateway")
    os.chmod(gateway_dir, 0o755)
    (gateway_dir / "assertion_ed25519.key").unlink()
    with pytest.raises(ValueError, match="exists without .*assertion_ed25519.key"):
        dev_keys.ensure(tmp_path)  # the verifiers hold a key nobody can sign for any more: say so, do not replace

    for path in (dev_keys.service_dir(tmp_path, "erp"), dev_keys.service_dir(tmp_path, "approval")):
        (path / "assertion_ed25519.pub").unlink()
    dev_keys.ensure(tmp_path)
    assert stat.S_IMODE(gateway_dir.stat().st_mode) == 0o700

    (dev_keys.service_dir(tmp_path, "erp") / "grant_ed25519.pub").write_text(
        encode_public_key(Ed25519PrivateKey.generate().public_key()) + "\n")
    with pytest.raises(ValueError, match="does not match"):
        dev_keys.ensure(tmp_path)


def test_an_older_data_dirs_shared_pair_is_adopted_and_removed(tmp_path: Path) -> None:
    old = Ed25519PrivateKey.generate()  # what an older `erpilot up` kept in the data dir itself
    (tmp_path / "grant_ed25519.key").write_text(encode_signing_key(old) + "\n")
    (tmp_path / "grant_ed25519.pub").write_text(encode_public_key(old.public_key()) + "\n")

    dev_keys.ensure(tmp_path)

    assert encode_signing_key(dev_keys.signing_key(tmp_path, "grant")) == encode_signing_key(old)
    assert verify_grant(sign_grant(GRANT, old), dev_keys.verify_key(tmp_path, "grant", "erp"))  # still verifies
    assert not (tmp_path / "grant_ed25519.key").exists() and not (tmp_path / "grant_ed25519.pub").exists()


def test_concurrent_threads_agree_on_one_set_of_pairs(tmp_path: Path) -> None:
    start = threading.Barrier(16)
    results: list[str] = []

    def create() -> None:
        start.wait()
        results.append(repr(sorted(dev_keys.service_env(tmp_path, "approval").items())
                            + sorted(dev_keys.service_env(tmp_path, "gateway").items())))

    threads = [threading.Thread(target=create) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 16 and len(set(results)) == 1
    assert layout(tmp_path) == EXPECTED  # no temporary file left behind


def test_concurrent_processes_agree_on_one_set_of_pairs(tmp_path: Path) -> None:
    # Each process waits for the same instant, then races to create the pairs, as services started together do.
    script = (
        "import sys, time; from pathlib import Path\n"
        "from erpilot_platform import dev_keys\n"
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "print(sorted(dev_keys.service_env(Path(sys.argv[1]), sys.argv[3]).items()))\n"
    )
    start_at = str(time.time() + 2.0)
    services = ["erp", "approval", "gateway", "erp"] * 2
    processes = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), start_at, service],
                                  stdout=subprocess.PIPE, text=True) for service in services]
    outputs = [process.communicate(timeout=60)[0].strip() for process in processes]
    assert all(process.returncode == 0 for process in processes)
    by_service = {service: {out for s, out in zip(services, outputs, strict=True) if s == service}
                  for service in set(services)}
    assert all(len(found) == 1 for found in by_service.values()), by_service
    assert by_service["erp"] == {str(sorted(dev_keys.service_env(tmp_path, "erp").items()))}
    assert layout(tmp_path) == EXPECTED
