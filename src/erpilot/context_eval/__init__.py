"""`erpilot context-eval`: the agent's context view on frozen long sessions, offline (no model, no services).

``run`` builds the request the model would get next for every scenario and checks it; ``scenarios`` and
``long_sessions`` are the frozen sessions, written with ``builders``; ``facts`` are what each request must hold.
"""
