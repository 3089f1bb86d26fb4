"""Wire contracts shared by every Erpilot service: message models, subjects and the tool catalog.

Nothing here does I/O or holds domain logic. A breaking change adds a `v2` module beside `v1`.
"""
