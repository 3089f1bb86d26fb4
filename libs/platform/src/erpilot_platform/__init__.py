"""Shared infrastructure for Erpilot services: settings, database, broker, outbox, inbox, failpoints."""
