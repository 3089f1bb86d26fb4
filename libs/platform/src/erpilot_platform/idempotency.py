"""The one idempotency rule of every service: a key names one request, and what it asked is its digest.

Each service keeps its own storage for a key (the ERP's inbox row, the approval's ``operation_id``
row, the agent's call row); what it stores, or compares, is ``request_digest`` of the fields that say
what was asked, and ``decide`` tells what a delivery under a key is:

- ``NEW``: nothing is stored under the key, so this delivery does the work;
- ``REPEAT``: the same request again (a redelivery, a person's retry), answered with what was stored;
- ``CONFLICT``: the key was used for another request, refused (each service keeps its own code).

The digest is ``v1:sha256:<hex>`` of the RFC 8785 (JCS) canonical JSON of the request, so key order
and the spelling of a number or an escaped character in the JSON that carried it do not matter, and
any change of a value does. The ``v1:`` prefix tells a digest of this form from one a service stored
before it used this module: ``decide`` compares such a legacy value with the service's own legacy
digest of the new request, so a key stored before an upgrade is still recognised after it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

import rfc8785

DIGEST_PREFIX = "v1:sha256:"
_VERSIONED = re.compile(r"^v\d+:")


class Decision(Enum):
    NEW = "new"
    REPEAT = "repeat"
    CONFLICT = "conflict"


def request_digest(request: Mapping[str, Any]) -> str:
    """``v1:sha256:<hex>`` of the RFC 8785 form of ``request``.

    ``request`` must be I-JSON (dicts with string keys, lists, strings, booleans, None, integers
    within ±(2**53 - 1), finite floats); anything else raises ``ValueError``. Strings are compared
    as given: RFC 8785 does not normalise Unicode, so NFC and NFD spellings are different requests.
    """
    return DIGEST_PREFIX + hashlib.sha256(rfc8785.dumps(dict(request))).hexdigest()


def decide(stored: str | None, digest: str, *, legacy: Callable[[], str] | None = None) -> Decision:
    """What a delivery with ``digest`` is, given the digest ``stored`` under its key (None: nothing).

    ``legacy`` computes the new request's digest in the form the service stored before this module;
    it is asked only when the stored value carries no version prefix.
    """
    if stored is None:
        return Decision.NEW
    if stored == digest:
        return Decision.REPEAT
    if legacy is not None and not _VERSIONED.match(stored) and stored == legacy():
        return Decision.REPEAT
    return Decision.CONFLICT
