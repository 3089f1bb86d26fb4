"""How `erpilot up` heals (``Supervisor.wait``): each process that dies is started again after a backoff, and
one that dies too often within a window stops everything."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RestartPolicy:
    """How `wait()` heals: a process that dies is started again after a backoff that doubles with each of
    its exits inside the window; the `max_exits`-th exit of one process inside `window` seconds stops all."""

    max_exits: int = 5
    window: float = 60.0
    first_delay: float = 0.5
    max_delay: float = 8.0

    def delay(self, recent_exits: int) -> float:
        """Seconds before the restart that follows the `recent_exits`-th exit inside the window."""
        return min(self.max_delay, self.first_delay * 2 ** max(0, recent_exits - 1))


@dataclass
class Watch:
    """What `wait()` knows of one supervised process: its recent exits and its pending restart."""

    exits: deque = field(default_factory=deque)  # monotonic times of its exits inside the window
    restart_at: float | None = None  # when to start it again (None: running, or not due)
    counted: object = None  # the process object whose exit is already counted (servers)

    def exited(self, now: float, policy: RestartPolicy) -> float | None:
        """Count an exit at ``now``: the delay before the restart, or None when it is the policy's last straw."""
        self.exits.append(now)
        while self.exits and self.exits[0] <= now - policy.window:
            self.exits.popleft()
        if len(self.exits) >= policy.max_exits:
            return None
        delay = policy.delay(len(self.exits))
        self.restart_at = now + delay
        return delay
