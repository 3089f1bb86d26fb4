"""The campaign's driver counts the armed service's death at its failpoint as its crash, never as "another process
exited", whenever in its look the death falls (a run of `outbox.after_publish@approval` was failed so: the target
died between the read of its exit code and the supervisor's look)."""

from __future__ import annotations

import pytest

from erpilot.torture.workload import Driver

pytestmark = pytest.mark.unit


class DyingStack:
    """A torture stack whose armed service dies at its failpoint right after the driver's first look at anything."""

    def __init__(self, target: str, *, other_exit: str | None = None):
        self.target = target
        self.dead = False
        self.reported = False
        self.other_exit = other_exit
        self.restarted: list[str] = []

    def _look(self) -> None:
        self.dead = True  # the race: whichever look comes first, the target dies just after it

    def exit_code(self, service: str) -> int | None:
        code = 137 if self.dead and service == self.target else None
        self._look()
        return code

    def unexpected_exits(self, *, besides: str | None = None) -> list[str]:
        exits = []
        if self.dead and not self.reported:
            self.reported = True
            exits.append(f"{self.target} exited with code 137")
        if self.other_exit:
            exits.append(self.other_exit)
            self.other_exit = None
        self._look()
        return [e for e in exits if not (besides and e.startswith(f"{besides} "))]

    def disarm(self, service: str) -> None:
        pass

    def kill(self, service: str) -> int:
        return 0

    def restart(self, service: str) -> None:
        self.restarted.append(service)
        self.dead = False


async def _recover_until_restarted(driver: Driver, ts: DyingStack) -> None:
    for _ in range(3):
        await driver.recover()
        if ts.restarted:
            return


async def test_a_target_dying_during_the_drivers_look_is_its_crash_not_another_process():
    ts = DyingStack("approval")
    driver = Driver(ts, "approval", client=None, tokens_={})  # type: ignore[arg-type]

    await _recover_until_restarted(driver, ts)

    assert driver.crashes == [137]
    assert driver.other_exits == []
    assert ts.restarted == ["approval"]


async def test_another_service_exiting_is_still_reported():
    ts = DyingStack("approval", other_exit="erp exited with code 1")
    driver = Driver(ts, "approval", client=None, tokens_={})  # type: ignore[arg-type]

    await _recover_until_restarted(driver, ts)

    assert driver.other_exits == ["erp exited with code 1"]
    assert driver.crashes == [137]
