"""Contracts of the sessions domain; versioned modules beside this file."""
