"""Named crash points for fault tests (SPEC §7): ``ERPILOT_FAILPOINTS="name=crash,..."``.

When armed, the process exits with status 137 (as if SIGKILLed) the first time it reaches the point:
no cleanup, no flush, no ack. The names are listed in docs/FAILPOINTS.md.

``ERPILOT_FAILPOINTS_FILE`` names a file holding the same kind of spec, read again whenever it changes
(a missing or empty file arms nothing): `erpilot torture` arms a running process this way, so a run
costs one restart (after the crash), not two.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)

_armed: dict[str, str] | None = None
_from_file: tuple[tuple[int, int] | None, dict[str, str]] = (None, {})


def _parse(spec: str) -> dict[str, str]:
    armed: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition("=")
        if action != "crash":
            raise ValueError(f"ERPILOT_FAILPOINTS: unsupported action {action!r} for {name!r} (only 'crash')")
        armed[name.strip()] = action
    return armed


def arm(spec: str) -> None:
    """Arm failpoints from a spec string (replaces any previous arming)."""
    global _armed
    _armed = _parse(spec)


def _armed_in_file() -> dict[str, str]:
    """The spec in ERPILOT_FAILPOINTS_FILE, parsed again only when the file changed."""
    global _from_file
    path = os.environ.get("ERPILOT_FAILPOINTS_FILE")
    if not path:
        return {}
    try:
        stat = os.stat(path)
        version = (stat.st_mtime_ns, stat.st_size)
    except FileNotFoundError:
        return {}
    if version != _from_file[0]:
        with open(path, encoding="utf-8") as spec:
            _from_file = (version, _parse(spec.read()))
    return _from_file[1]


def failpoint(name: str) -> None:
    """Crash here if the failpoint ``name`` is armed."""
    global _armed
    if _armed is None:
        _armed = _parse(os.environ.get("ERPILOT_FAILPOINTS", ""))
    if _armed.get(name) == "crash" or _armed_in_file().get(name) == "crash":
        log.critical("failpoint %s reached: exiting with 137", name)
        sys.stderr.flush()
        os._exit(137)
