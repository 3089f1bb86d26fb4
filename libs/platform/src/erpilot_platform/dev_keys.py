"""Development key pairs, a file per service that needs a key, readable by its owner alone (SPEC §7, §10; issue 26).

Three Ed25519 pairs exist: grants (the approval service signs, the ERP verifies), requester assertions (the
gateway signs, the ERP and the approval service verify) and the ledger's approval requests (the ERP signs, the
approval service verifies). Outside dev mode each service is given its half as an environment variable
(``erpilot keygen`` prints the six). In dev mode (``erpilot up``, the test stacks,
``erpilot serve`` with ``ERPILOT_DEV_MODE=1``), when the variables are unset, the keys live under
``$ERPILOT_DATA_DIR/keys/<service>/``, one file per key and service, never one pair in a shared place:

    keys/approval/grant_ed25519.key       0600  signs grants (and the audit log)
    keys/approval/assertion_ed25519.pub   0644  verifies the gateway's requester assertions
    keys/approval/ledger_ed25519.pub      0644  verifies the ledger's approval requests
    keys/erp/grant_ed25519.pub            0644  verifies grants
    keys/erp/assertion_ed25519.pub        0644  verifies requester assertions
    keys/erp/ledger_ed25519.key           0600  signs its approval requests
    keys/gateway/assertion_ed25519.key    0600  signs requester assertions

``keys/`` and each service's directory are 0700; the agent, which runs the model, has none. A pair is created
once, by the first process that needs it, and kept: a grant or an assertion signed before a restart (a commit or
an approval request still in an outbox) still verifies after it. ``erpilot up`` creates them before any service
starts, reads each service's own files and hands that service its keys as variables (``Stack.env_for``); no
service is given the directory. A pair left by an older version in the data dir itself
(``$ERPILOT_DATA_DIR/grant_ed25519.key``) is adopted once and removed from there.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from erpilot_platform.grants import encode_public_key, encode_signing_key, load_signing_key, load_verify_key

KEYS_DIR = "keys"
PRIVATE_MODE = 0o600
PUBLIC_MODE = 0o644
DIRECTORY_MODE = 0o700


@dataclass(frozen=True)
class KeyPair:
    """One pair: who signs with its private half, who verifies with its public half, and its variables' names."""

    name: str  # the files' stem: <name>_ed25519.key | .pub
    env_prefix: str  # <prefix>_SIGNING_KEY, <prefix>_VERIFY_KEY
    signer: str
    verifiers: tuple[str, ...]
    signs: str  # what the signatures are on, for people (``erpilot keygen``)

    @property
    def signing_env(self) -> str:
        return f"{self.env_prefix}_SIGNING_KEY"

    @property
    def verify_env(self) -> str:
        return f"{self.env_prefix}_VERIFY_KEY"

    @property
    def private_file(self) -> str:
        return f"{self.name}_ed25519.key"

    @property
    def public_file(self) -> str:
        return f"{self.name}_ed25519.pub"


GRANT = KeyPair("grant", "ERPILOT_GRANT", signer="approval", verifiers=("erp",), signs="grants")
ASSERTION = KeyPair("assertion", "ERPILOT_ASSERTION", signer="gateway", verifiers=("erp", "approval"),
                    signs="requester assertions")
LEDGER = KeyPair("ledger", "ERPILOT_LEDGER", signer="erp", verifiers=("approval",),
                 signs="the ledger's approval requests")
PAIRS = {pair.name: pair for pair in (GRANT, ASSERTION, LEDGER)}


def service_dir(data_dir: Path, service: str) -> Path:
    """Where ``service``'s development keys are (its files only)."""
    return Path(data_dir) / KEYS_DIR / service


def files_of(service: str) -> dict[str, int]:
    """The file names in ``service``'s key directory and the mode of each (what ``ensure`` creates there)."""
    files = {}
    for pair in PAIRS.values():
        if pair.signer == service:
            files[pair.private_file] = PRIVATE_MODE
        if service in pair.verifiers:
            files[pair.public_file] = PUBLIC_MODE
    return files


def ensure(data_dir: Path) -> None:
    """Create every pair whose files are missing; keep (and check) those that exist.

    A pair is its signer's private key file; each verifier's public file is derived from it. Files are written
    whole under a temporary name and hard-linked into place, which fails if the name exists: of processes racing
    to create a pair the first wins, and everyone reads the winner's files, never a half-written one.
    """
    for pair in PAIRS.values():
        _ensure_pair(Path(data_dir), pair)


def signing_key(data_dir: Path, pair_name: str) -> Ed25519PrivateKey:
    """The signer's private key of a pair, from the signer's own directory (created first if absent)."""
    pair = PAIRS[pair_name]
    path = service_dir(data_dir, pair.signer) / pair.private_file
    if not path.exists():
        ensure(data_dir)
    return _read(path, load_signing_key, f"{pair.name} signing")


def verify_key(data_dir: Path, pair_name: str, service: str) -> Ed25519PublicKey:
    """``service``'s copy of a pair's public key, from its own directory (the pairs created first if absent)."""
    pair = PAIRS[pair_name]
    if service not in pair.verifiers:
        raise ValueError(f"{service} does not verify {pair.name} signatures")
    path = service_dir(data_dir, service) / pair.public_file
    if not path.exists():
        ensure(data_dir)
    return _read(path, load_verify_key, f"{pair.name} verify")


def service_env(data_dir: Path, service: str, pairs: tuple[str, ...] = tuple(PAIRS)) -> dict[str, str]:
    """``service``'s own development keys as the variables it reads (nothing for a service that needs none)."""
    env: dict[str, str] = {}
    for name in pairs:
        pair = PAIRS[name]
        if pair.signer == service:
            env[pair.signing_env] = encode_signing_key(signing_key(data_dir, name))
        if service in pair.verifiers:
            env[pair.verify_env] = encode_public_key(verify_key(data_dir, name, service))
    return env


def _ensure_pair(data_dir: Path, pair: KeyPair) -> None:
    private_path = service_dir(data_dir, pair.signer) / pair.private_file
    public_paths = [service_dir(data_dir, verifier) / pair.public_file for verifier in pair.verifiers]
    if not private_path.exists():
        # A verifier's file is written after the signer's, so one found with no private key beside it (looked for
        # again: another process may just have created both) means the private key was lost.
        lost = [path for path in public_paths if path.exists()]
        if lost and not private_path.exists():
            raise ValueError(f"{lost[0]} exists without {private_path}: restore that key, or remove the "
                             f"{pair.name} pair's files (what was signed with it will no longer verify)")
        _private_dir(private_path.parent)
        _create_exclusive(private_path, encode_signing_key(_adopted_or_new(data_dir, pair)), mode=PRIVATE_MODE)
    private_key = _read(private_path, load_signing_key, f"{pair.name} signing")
    encoded_public = encode_public_key(private_key.public_key())
    for path in public_paths:
        if not path.exists():
            _private_dir(path.parent)
            _create_exclusive(path, encoded_public, mode=PUBLIC_MODE)
        if path.read_text(encoding="ascii").strip() != encoded_public:
            raise ValueError(f"{path} does not match {private_path}")
    _retire_legacy(data_dir, pair, encode_signing_key(private_key))


def _adopted_or_new(data_dir: Path, pair: KeyPair) -> Ed25519PrivateKey:
    """The pair an older version kept in the data dir itself (so what it signed still verifies), else a new one."""
    try:
        return _read(data_dir / pair.private_file, load_signing_key, f"{pair.name} signing")
    except FileNotFoundError:  # none (or another process adopted and retired it: its link wins anyway)
        return Ed25519PrivateKey.generate()


def _retire_legacy(data_dir: Path, pair: KeyPair, encoded_private: str) -> None:
    # Only once its key is the one in use: a different key there is not ours to delete.
    legacy = data_dir / pair.private_file
    with contextlib.suppress(OSError):
        if legacy.read_text(encoding="ascii").strip() == encoded_private:
            (data_dir / pair.public_file).unlink(missing_ok=True)
            legacy.unlink(missing_ok=True)


def _read(path: Path, load, kind: str):
    try:
        return load(path.read_text(encoding="ascii"), kind=kind)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _private_dir(directory: Path) -> None:
    """``directory`` and its ``keys`` parent, created if needed and made 0700 (an existing wider one narrowed)."""
    for path in (directory.parent, directory):
        path.mkdir(parents=True, exist_ok=True, mode=DIRECTORY_MODE)
        os.chmod(path, DIRECTORY_MODE)


def _create_exclusive(path: Path, text: str, mode: int) -> None:
    """Create ``path`` with ``text`` unless it already exists; readers never see a partial file."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have narrowed it; make it exactly `mode`
        os.write(fd, (text + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(temp, path)
    except FileExistsError:
        pass  # another process created it first; theirs is the one everybody uses
    finally:
        temp.unlink()
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Makes the new name durable across a power loss; not every platform can open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
