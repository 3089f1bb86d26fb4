"""The run driver's access to the tool-call pipeline (the ``Tools`` port of ``run_ports``)."""

from __future__ import annotations

from typing import Any

from erpilot_agent.domain.run_state import Run
from erpilot_agent.domain.tool_calls import CallState
from erpilot_agent.service_layer.ports import CallRecord, Work
from erpilot_agent.service_layer.run_ports import CallStatus
from erpilot_agent.service_layer.tool_calls import ToolCallService


class PipelineTools:
    def __init__(self, service: ToolCallService):
        self.service = service

    async def start(self, *, run: Run, call_id: str, tool: str, arguments: Any) -> None:
        # Every call of a run carries the assertion of the message that started the run.
        await self.service.start(session_id=run.session_id, owner=run.owner, tool=tool, raw_arguments=arguments,
                                 call_id=call_id, assertion=run.assertion, source="model", run_id=run.run_id)

    async def status(self, session_id: str, call_ids: list[str]) -> dict[str, CallStatus]:
        if not call_ids:
            return {}

        async def look(unit: Work) -> list[CallRecord]:
            return await unit.calls.of_session(session_id, call_ids)

        found = {}
        for record in await self.service.unit.read(look):
            call = record.call
            live = call.model_content()
            found[record.call_id] = CallStatus(call.state.value, live if call.state is CallState.FINISHED else None,
                                               live)
        return found

    async def denied_tools(self) -> frozenset[str]:
        view = await self.service.downstream.policy_view()
        return frozenset(tool.tool for tool in view.tools if tool.action == "deny")
