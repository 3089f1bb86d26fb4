"""Contracts of the agent domain; versioned modules beside this file."""
