"""Where the CLI finds a deployment: ``ERPILOT_DATA_DIR`` and the URLs of the stack ``erpilot up`` runs there.

``erpilot up`` writes ``$ERPILOT_DATA_DIR/stack.json`` (mode 0600: a database URL may hold a password) once the
stack is ready and removes it when it stops, so ``erpilot audit``, ``erpilot dlq`` and ``erpilot seed`` beside a
running ``./dev up`` need no variable; ``ERPILOT_DATABASE_URL`` / ``ERPILOT_NATS_URL`` still win when set.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STACK_FILE = "stack.json"
# The variable each recorded URL stands in for.
RECORDED = {"ERPILOT_DATABASE_URL": "database_url", "ERPILOT_NATS_URL": "nats_url"}


def data_dir() -> Path:
    return Path(os.environ.get("ERPILOT_DATA_DIR", ".erpilot")).resolve()


def record(directory: Path, *, database_url: str, nats_url: str, gateway_urls: list[str]) -> Path:
    """Write the running stack's URLs for the other commands (only the owner may read them)."""
    path = directory / STACK_FILE
    temp = path.with_name(f".{STACK_FILE}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"database_url": database_url, "nats_url": nats_url, "gateway_urls": gateway_urls,
                   "pid": os.getpid()}, out)
    os.replace(temp, path)
    return path


def forget(directory: Path) -> None:
    """The stack stopped: its URLs no longer lead anywhere."""
    (directory / STACK_FILE).unlink(missing_ok=True)


def recorded(directory: Path) -> dict[str, object]:
    """What a running ``erpilot up`` recorded in ``directory`` (empty when none runs there)."""
    try:
        values = json.loads((directory / STACK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    pid = values.get("pid")
    if isinstance(pid, int) and not _alive(pid):  # a stack killed before it could forget its file
        return {}
    return values


def require_url(name: str) -> str:
    """``name`` from the environment, else from the stack ``erpilot up`` runs in ``ERPILOT_DATA_DIR``; exit with
    what to do when neither has it."""
    value = os.environ.get(name) or recorded(data_dir()).get(RECORDED.get(name, ""))
    if not value:
        hint = f" and no `erpilot up` runs in {data_dir()} (set ERPILOT_DATA_DIR to its data dir)" \
            if name in RECORDED else ""
        sys.exit(f"erpilot: {name} is not set{hint}")
    return str(value)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
