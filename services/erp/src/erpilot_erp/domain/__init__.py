"""The ERP's business rules as plain Python: no I/O, no database, no broker.

The adapter loads records by key into the dataclasses of ``model`` (and ``plans.WriteState``), calls a
pure function with them, the arguments and ``now``, and stores what comes back, or reports the raised
``BusinessError``. Entry points: ``drafts`` (create, edit, read drafts), ``reads`` (search,
get_order_task), ``operations`` (prepare and commit of the write tools), ``seed_data`` (demo catalog).
"""
