"""Test support shared by every package: the NATS and PostgreSQL back ends for integration tests."""

from erpilot_platform.testing.backends import Backend, postgres_scratch_dir, start_backend, with_database

__all__ = ["Backend", "postgres_scratch_dir", "start_backend", "with_database"]
