"""One step of a run: a model request, or a round of the tool calls the model asked for.

1. build the context fresh from the whole session history (``domain.context_view``);
2. ask the model; store its message *with the call ids* before anything runs;
3. run the calls (in parallel) through the tool-call pipeline; a call the agent refuses (unknown tool,
   invalid arguments, policy) becomes an error result for the model, never a crash;
4. store the results: all there → next step; a write waits for a person → the run is ``waiting``.

Model failures end the run with ``run_failed`` (``model_error``, ``model_timeout``,
``context_overflow``, ``max_steps``), only ever between steps, never with a call half done.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from erpilot_agent.domain.context_view import ContextOverflow, build_context
from erpilot_agent.domain.history import MalformedHistory, estimate_tokens, system_message
from erpilot_agent.domain.model_ids import for_model
from erpilot_agent.domain.run_sharing import offered_tools, open_calls, with_states
from erpilot_agent.domain.run_state import Run
from erpilot_agent.domain.runs import (
    ArgumentsNotJson,
    CallRequest,
    ModelError,
    assistant_turn,
    parse_arguments,
    rejected_content,
)
from erpilot_agent.domain.tool_calls import CallState
from erpilot_agent.service_layer.run_ports import RunSnapshot, ToolResult, Tools
from erpilot_agent.service_layer.run_records import RunRecords
from erpilot_platform.refusals import Refused

log = logging.getLogger(__name__)

# Calls the driver may (re)start: nothing is waiting on a person or a commit yet (a write still preparing gets
# its prepare again: the ERP answers a repeat from its inbox). Calls awaiting a decision or executing move on
# with the approval service's and the ERP's events.
STARTABLE = frozenset({CallState.RECEIVED.value, CallState.RUNNING.value, CallState.PREPARING.value})


class RunSteps:
    def __init__(self, store: RunRecords, tools: Tools, model: Any, *, tool_specs: list[dict[str, Any]],
                 budget_tokens: int, tool_bytes: int, max_steps: int, system_prompt: str):
        self.store = store
        self.tools = tools
        self.model = model
        self.tool_specs = tool_specs
        self.budget_tokens = budget_tokens
        self.tool_bytes = tool_bytes
        self.max_steps = max_steps
        self.system_prompt = system_prompt

    async def ask_model(self, snapshot: RunSnapshot) -> bool:
        """One model request; True if it asked for tool calls (the run goes on)."""
        run = snapshot.run
        if run.steps >= self.max_steps:
            await self.store.fail(run.run_id, "max_steps",
                                  f"the model made {run.steps} requests without a final answer")
            return False
        entries = [system_message(self.system_prompt), *(item.entry for item in snapshot.history)]
        others = open_calls(snapshot.history, run.run_id)  # e.g. an order of a waiting run, still with a person
        if others:
            status = await self.tools.status(run.session_id, others)
            entries = with_states(entries, {call_id: status[call_id].live if call_id in status else None
                                            for call_id in others})
        tools = offered_tools(self.tool_specs, await self.tools.denied_tools())
        try:
            # The view is built under the global call ids (a model's ids may repeat across runs);
            # the model then gets every call back under the id it issued.
            messages = for_model(build_context(entries, budget_tokens=self.budget_tokens,
                                               tool_bytes=self.tool_bytes))
            if estimate_tokens(messages) > self.budget_tokens:  # a model id longer than its global one
                raise ContextOverflow(estimate_tokens(messages), self.budget_tokens)
        except ContextOverflow as exc:
            await self.store.fail(run.run_id, "context_overflow", str(exc))
            return False
        except MalformedHistory as exc:
            await self.store.fail(run.run_id, "internal_error", f"the stored history is malformed: {exc}")
            return False
        try:
            reply = await self.model.complete(messages, tools)
            entry = assistant_turn(reply, run.run_id, snapshot.history)
        except ModelError as exc:
            log.warning("model failed in run %s: %s", run.run_id, exc)
            await self.store.fail(run.run_id, exc.code, exc.message)
            return False
        await self.store.record_reply(run.run_id, entry)
        return bool(entry.get("tool_calls"))

    async def run_calls(self, snapshot: RunSnapshot, calls: list[CallRequest]) -> bool:
        """Start what has not started, collect what finished; True when every call has a result."""
        run = snapshot.run
        ids = [call.call_id for call in calls]
        status = await self.tools.status(run.session_id, ids)
        to_start = [call for call in calls if call.call_id not in status or status[call.call_id].state in STARTABLE]
        outcomes = await asyncio.gather(*(self._start(run, call) for call in to_start), return_exceptions=True)
        results: dict[str, ToolResult] = {}
        failures = []
        for outcome in outcomes:
            if isinstance(outcome, ToolResult):
                results[outcome.call_id] = outcome
            elif isinstance(outcome, BaseException):
                failures.append(outcome)
        status = await self.tools.status(run.session_id, [call_id for call_id in ids if call_id not in results])
        for call_id, call_status in status.items():
            if call_status.state == CallState.FINISHED.value and call_status.content is not None:
                results[call_id] = ToolResult(call_id, call_status.content)
        complete = len(results) == len(ids)
        waiting = not complete and not failures
        if results or waiting:
            await self.store.record_results(run.run_id, [results[i] for i in ids if i in results], waiting=waiting)
        if failures:
            raise failures[0]
        return complete

    async def _start(self, run: Run, call: CallRequest) -> ToolResult | None:
        try:
            arguments = parse_arguments(call.arguments_text)
        except ArgumentsNotJson as exc:
            return ToolResult(call.call_id, rejected_content("invalid_arguments", str(exc)),
                              rejected=(call.name, call.arguments_text))
        try:
            await self.tools.start(run=run, call_id=call.call_id, tool=call.name, arguments=arguments)
        except Refused as refusal:
            return ToolResult(call.call_id, rejected_content(refusal.code, refusal.message, refusal.details),
                              rejected=(call.name, arguments))
        return None
