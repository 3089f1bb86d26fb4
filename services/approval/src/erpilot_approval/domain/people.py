"""Who holds which role now (SPEC §11): the people directory a delegation's giver is checked against.

A token says what a person held when it was signed; a delegation lasts weeks. So a delegate's decision weighs
what the giver holds *now*, per the policy's ``[people.<sub>] roles`` and the ``ERPILOT_ROLE_SOURCE`` file,
whichever are configured. Both are written alike::

    [people.bob]
    roles = ["requester"]

The file names each person once; where both name someone, the file wins (it is the one re-read while running).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from erpilot_approval.domain import policy_values as parse
from erpilot_approval.domain.policy_values import PolicyError

# Each person's roles now, by sub. None where no directory is configured at all.
Directory = Mapping[str, tuple[str, ...]]
_PERSON_KEYS = ("roles",)


def parse_people(value: Any, path: str = "people") -> dict[str, tuple[str, ...]]:
    """A ``[people]`` table: ``[people.<sub>] roles = [...]`` for each person (an empty list: no role)."""
    people: dict[str, tuple[str, ...]] = {}
    for sub, entry in parse.table(value, path).items():
        where = f"{path}.{sub}"
        person = parse.table(entry, where)
        parse.reject_unknown_keys(person, _PERSON_KEYS, where + ".")
        if "roles" not in person:
            raise PolicyError(f"{where}.roles: missing")
        people[sub] = parse.roles(person["roles"], f"{where}.roles", allow_empty=True)
    return people


def load_role_source(text: str) -> dict[str, tuple[str, ...]]:
    """The ``ERPILOT_ROLE_SOURCE`` file: a ``[people]`` table and nothing else."""
    raw = parse.parse_toml(text)
    parse.reject_unknown_keys(raw, ("people",), "")
    return parse_people(raw.get("people", {}))


def directory(policy_people: Directory | None, source: Directory | None) -> Directory | None:
    """The people directory in force: the policy's, overlaid person by person with the role source's; None when
    neither is configured."""
    if policy_people is None and source is None:
        return None
    return {**(policy_people or {}), **(source or {})}
