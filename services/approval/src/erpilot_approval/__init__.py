"""Erpilot."""
