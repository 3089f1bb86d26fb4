"""Contracts of the erp domain; versioned modules beside this file."""
