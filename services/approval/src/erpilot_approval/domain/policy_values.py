"""The typed values of the policy file (SPEC §6), each refused with the key path that holds it."""

from __future__ import annotations

import re
import tomllib
from datetime import timedelta
from typing import Any

from erpilot_approval.domain.votes import MAX_APPROVALS_REQUIRED

ROLES = ("requester", "approver", "manager", "admin")
# Far beyond any sensible wait, and keeps `now + ttl` well inside datetime's range.
MAX_TTL = timedelta(days=366)
_DURATION = re.compile(r"([1-9][0-9]{0,6})([smh])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


class PolicyError(ValueError):
    """The policy text is malformed; the message starts with the offending key."""


def quorum(value: Any, path: str) -> int:
    """``approvals_required`` or ``rejections_to_reject``: an integer from 1 to MAX_APPROVALS_REQUIRED."""
    if type(value) is not int or not 1 <= value <= MAX_APPROVALS_REQUIRED:
        raise PolicyError(f"{path}: expected an integer from 1 to {MAX_APPROVALS_REQUIRED}, got {value!r}")
    return value


def roles(value: Any, path: str, *, allow_empty: bool) -> tuple[str, ...]:
    """A list of known roles, returned de-duplicated in the canonical ROLES order."""
    if not isinstance(value, list):
        raise PolicyError(f"{path}: expected a list of roles, got {value!r}")
    for index, role in enumerate(value):
        if role not in ROLES:
            raise PolicyError(f"{path}[{index}]: unknown role {role!r} (known: {', '.join(ROLES)})")
    if not value and not allow_empty:
        raise PolicyError(f"{path}: expected at least one role")
    return tuple(role for role in ROLES if role in value)


def duration(value: Any, path: str) -> timedelta:
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise PolicyError(f"{path}: expected a duration like '15m', got {value!r}")
    ttl = timedelta(seconds=int(match[1]) * _UNIT_SECONDS[match[2]])
    if ttl > MAX_TTL:
        raise PolicyError(f"{path}: at most {int(MAX_TTL.total_seconds() // 3600)}h, got {value!r}")
    return ttl


def choice(value: Any, choices: tuple[str, ...], path: str) -> str:
    if value not in choices or not isinstance(value, str):
        raise PolicyError(f"{path}: expected one of {', '.join(choices)}, got {value!r}")
    return value


def table(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PolicyError(f"{path}: expected a table, got {value!r}")
    return value


def reject_unknown_keys(table: dict[str, Any], known: tuple[str, ...], prefix: str) -> None:
    for key in table:
        if key not in known:
            raise PolicyError(f"{prefix}{key}: unknown key (expected one of {', '.join(known)})")


def parse_toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"policy: not valid TOML: {exc}") from None
