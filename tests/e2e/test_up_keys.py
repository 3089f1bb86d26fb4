"""`erpilot up`'s development keys (issue 26, low finding): a file per service under `$ERPILOT_DATA_DIR/keys/<service>/`
(private keys 0600, directories 0700, owned by the user running `up`), each service process holding only its own
keys, and the same keys after a restart of `up`, so what was signed before it still verifies after it.

The last part is seen the way it matters: an approval requested before the restart is edited after it. The edit
re-prepares through the ERP with the requester assertion the gateway signed before the restart, and the approval
service accepts the new version only if that assertion still verifies (a new key would dead-letter it as
`assertion_invalid`), and only if it carries the ERP's ledger signature under the same pair (a new ledger key on
one side would dead-letter it as `ledger_signature_invalid`). Two `erpilot up` starts: about 1-2 minutes on a
2-core machine.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import httpx
import pytest

from erpilot.stack.tokens import make_token
from erpilot_platform.testing.backends import postgres_scratch_dir
from tests.e2e.conftest import wait_for
from tests.e2e.up_process import UpProcess

pytestmark = pytest.mark.e2e
KEY_VARIABLES = {"ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_GRANT_VERIFY_KEY", "ERPILOT_ASSERTION_SIGNING_KEY",
                 "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_SIGNING_KEY", "ERPILOT_LEDGER_VERIFY_KEY"}
OWN_KEYS = {"agent": set(),
            "approval": {"ERPILOT_GRANT_SIGNING_KEY", "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_VERIFY_KEY"},
            "erp": {"ERPILOT_GRANT_VERIFY_KEY", "ERPILOT_ASSERTION_VERIFY_KEY", "ERPILOT_LEDGER_SIGNING_KEY"},
            "gateway": {"ERPILOT_ASSERTION_SIGNING_KEY"}}
KEY_FILES = {"approval": {"grant_ed25519.key": 0o600, "assertion_ed25519.pub": 0o644, "ledger_ed25519.pub": 0o644},
             "erp": {"grant_ed25519.pub": 0o644, "assertion_ed25519.pub": 0o644, "ledger_ed25519.key": 0o600},
             "gateway": {"assertion_ed25519.key": 0o600}}


@pytest.fixture
def up_data_dir():
    """Outside pytest's tmp tree: as root PostgreSQL runs as another user, who must traverse every parent."""
    path = postgres_scratch_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def keys_of_processes(up: UpProcess) -> dict[str, dict[str, str]]:
    """service -> the key variables its running process really has (Linux /proc)."""
    found = {}
    for service in OWN_KEYS:
        (pid,) = up.pids(service)
        raw = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
        environ = dict(item.split("=", 1) for item in raw if "=" in item)
        found[service] = {name: value for name, value in environ.items() if name in KEY_VARIABLES}
        assert not Path(environ["ERPILOT_DATA_DIR"]).is_relative_to(up.data_dir / "keys")
    return found


def key_files(data_dir: Path) -> dict[str, dict[str, tuple[int, int, bytes]]]:
    """service -> {file: (mode, owner uid, content)} under keys/; every directory checked 0700 and ours."""
    root = data_dir / "keys"
    files = {}
    for directory in (root, *root.iterdir()):
        assert (stat.S_IMODE(directory.stat().st_mode), directory.stat().st_uid) == (0o700, os.getuid()), directory
    for service in root.iterdir():
        files[service.name] = {path.name: (stat.S_IMODE(path.stat().st_mode), path.stat().st_uid, path.read_bytes())
                               for path in service.iterdir()}
    return files


def client(up: UpProcess, sub: str, *roles: str) -> httpx.Client:
    secret = (up.data_dir / "auth_secret").read_text().strip()  # the dev secret `up` keeps in the data dir
    return httpx.Client(base_url=up.gateway_urls[0], timeout=30,
                        headers={"Authorization": f"Bearer {make_token(secret, sub, list(roles))}"})


def test_up_gives_each_service_its_own_key_files_and_keeps_the_keys_across_a_restart(up_data_dir):
    up = UpProcess(up_data_dir)
    try:
        up.wait_running()
        before = keys_of_processes(up)
        assert {service: set(keys) for service, keys in before.items()} == OWN_KEYS
        files = key_files(up_data_dir)
        assert {service: {name: mode for name, (mode, _, _) in found.items()} for service, found in files.items()} \
            == KEY_FILES
        assert all(uid == os.getuid() for found in files.values() for _, uid, _ in found.values())
        assert not [path for path in up_data_dir.iterdir() if path.name.endswith((".key", ".pub"))]

        with client(up, "alice", "requester") as alice:
            session_id = alice.post("/v1/sessions", json={}).json()["session_id"]
            asked = alice.post(f"/v1/sessions/{session_id}/tool-calls", json={
                "tool": "adjust_stock", "arguments": {"sku": "SKU-COFFEE-1KG", "delta": 2, "reason": "recount"}})
            assert asked.status_code == 202, asked.text
            pending = asked.json()
        assert up.stop() == 0
    finally:
        up.kill()

    again = UpProcess(up_data_dir)
    try:
        again.wait_running()
        assert keys_of_processes(again) == before
        assert key_files(up_data_dir) == files

        # Signed before the restart, verified after it: the edit carries the first start's requester assertion.
        with client(again, "mia", "manager") as mia, client(again, "max", "manager") as max_, \
                client(again, "alice", "requester") as alice:
            edited = mia.post(f"/v1/approvals/{pending['pending_id']}/edit", json={
                "fingerprint": pending["fingerprint"],
                "arguments": {"sku": "SKU-COFFEE-1KG", "delta": 3, "reason": "recount"}})
            assert edited.status_code == 201, edited.text
            version = edited.json()
            decided = max_.post(f"/v1/approvals/{version['pending_id']}/decision",
                                json={"action": "approve", "fingerprint": version["fingerprint"]})
            assert decided.status_code == 200, decided.text

            def finished():
                view = alice.get(f"/v1/sessions/{session_id}/tool-calls/{pending['call_id']}").json()
                return view if view["status"] == "finished" else None

            assert wait_for(finished, timeout=60)["outcome"] == "succeeded"
        assert again.stop() == 0
    finally:
        again.kill()
