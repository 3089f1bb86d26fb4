"""Plain-Python domain of the agent: no I/O."""
