"""`erpilot bench`: the approval cycle end to end per concurrency level, and what it costs.

``run`` drives a level on a stack of its own, ``load`` is the HTTP load it puts on it, ``meter`` measures a phase
(CPU per process role from ``proc``, commits from ``db``), ``stats`` and ``report`` are the pure arithmetic and
the printed tables (``tables`` their shared cells), ``peer`` runs the LangGraph and DBOS peers, ``compare`` sets
Erpilot beside them (ratios, issue 31's targets). Nothing here may import more than the standard library at
package level: benchmarks/peer_langgraph.py imports ``db``, ``meter``, ``proc`` and ``stats`` from the source tree
in a virtual environment of its own.
"""
