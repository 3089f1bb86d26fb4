"""Contracts of the approval domain; versioned modules beside this file."""
