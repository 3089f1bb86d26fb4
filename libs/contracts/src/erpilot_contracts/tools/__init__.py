"""Contracts of the tools domain; versioned modules beside this file."""
