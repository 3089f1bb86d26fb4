"""Embedded NATS and PostgreSQL for `erpilot up`; the implementation lives in erpilot_platform for tests."""

from erpilot_platform.embedded import (
    EmbeddedNats,
    EmbeddedNatsCluster,
    EmbeddedPostgres,
    die_with_parent,
    log_tail,
    stop_process,
)

__all__ = ["EmbeddedNats", "EmbeddedNatsCluster", "EmbeddedPostgres", "die_with_parent", "log_tail", "stop_process"]
