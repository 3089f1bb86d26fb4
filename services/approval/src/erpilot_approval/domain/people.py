"""Who holds which role now (SPEC §11): the people directory a delegation's giver is checked against.

A token says what a person held when it was signed; a delegation lasts weeks. So a delegate's decision weighs
what the giver holds *now*, per the policy's ``[people.<sub>] roles`` and the ``ERPILOT_ROLE_SOURCE`` file,
whichever are configured. Both are written alike::

    [people.bob]
    roles = ["requester"]
    email = "bob@example.com"   # optional: approval emails (SPEC §11 "Approval channels")
    chat_id = "U024BE7LH"       # optional: the chat user whose card buttons decide as bob

The file names each person once; where both name someone, the file wins (it is the one re-read while running).
Where to reach a person (``email``, ``chat_id``) is read from the policy only: it says nothing about authority.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from erpilot_approval.domain import policy_values as parse
from erpilot_approval.domain.policy_values import PolicyError

# Each person's roles now, by sub. None where no directory is configured at all.
Directory = Mapping[str, tuple[str, ...]]
_PERSON_KEYS = ("roles", "email", "chat_id")
# One address, no display name and nothing a mail header could be split on.
_EMAIL = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")


@dataclass(frozen=True)
class Contact:
    """Where a person is reached: their email address and their chat user id (either may be None)."""

    email: str | None = None
    chat_id: str | None = None


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


def parse_contacts(value: Any, path: str = "people") -> dict[str, Contact]:
    """Each person's ``email`` and ``chat_id`` of a ``[people]`` table (those with neither are left out)."""
    contacts: dict[str, Contact] = {}
    for sub, entry in parse.table(value, path).items():
        person = parse.table(entry, f"{path}.{sub}")
        email, chat_id = person.get("email"), person.get("chat_id")
        if email is not None and (not isinstance(email, str) or len(email) > 254 or not _EMAIL.fullmatch(email)):
            raise PolicyError(f"{path}.{sub}.email: expected one email address, got {email!r}")
        if chat_id is not None and (not isinstance(chat_id, str) or not 0 < len(chat_id) <= 100):
            raise PolicyError(f"{path}.{sub}.chat_id: expected a chat user id, got {chat_id!r}")
        if email is not None or chat_id is not None:
            contacts[sub] = Contact(email=email, chat_id=chat_id)
    return contacts


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
