"""``ERPILOT_ROLE_SOURCE``: a TOML file of each person's roles now (``domain.people``), re-read when it changes.

An operator (or a sync job from the company directory) rewrites it when someone's roles change; the next decision
sees the new roles, without a restart. Checked by modification time and size at each call (one ``stat``).
A file that cannot be read or parsed while running names nobody: every delegation decides nothing until it is
fixed (failing closed: a broken file must not keep a leaver's delegation alive). At start-up it stops the service.
"""

from __future__ import annotations

import logging
from pathlib import Path

from erpilot_approval.domain.people import Directory, load_role_source
from erpilot_approval.domain.policy_values import PolicyError

log = logging.getLogger(__name__)


class RoleSourceFile:
    """Call it for the directory as the file says now."""

    def __init__(self, path: Path):
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._people: Directory = {}
        self.load()

    def load(self) -> Directory:
        """Read the file now; OSError or PolicyError when it cannot be read or is malformed."""
        stat = self.path.stat()
        people = load_role_source(self.path.read_text(encoding="utf-8"))
        self._seen, self._people = (stat.st_mtime_ns, stat.st_size), people
        return people

    def __call__(self) -> Directory:
        try:
            stat = self.path.stat()
            if (stat.st_mtime_ns, stat.st_size) != self._seen:
                return self.load()
        except (OSError, PolicyError) as exc:
            log.error("ERPILOT_ROLE_SOURCE %s: %s; delegations decide nothing until it is fixed", self.path, exc)
            self._seen, self._people = None, {}
        return self._people
