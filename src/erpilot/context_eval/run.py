"""`erpilot context-eval`: the context view on frozen long sessions, offline (no model, no services).

For every scenario of ``scenarios`` it builds the request the model would get next (the agent's
system prompt plus the session's history, through ``build_context`` with the scenario's budget and the
default ``ERPILOT_CONTEXT_TOOL_BYTES``, then ``for_model``: the calls under the ids the model issued, as
the agent sends them), and reports whether each needed fact is in that request, whether every tool-call
pair is intact, and its size (UTF-8 bytes and estimated tokens, SPEC §8) against the full history. A
scenario passes when every fact is present, the pairs are intact, the request is within the budget and
at most ``MAX_SHARE`` of the full history.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from erpilot.context_eval.facts import pairs_intact
from erpilot.context_eval.scenarios import Scenario, all_scenarios
from erpilot_agent.context import (
    DEFAULT_TOOL_BYTES,
    SYSTEM_PROMPT,
    ContextOverflow,
    build_context,
    entry_bytes,
    estimate_tokens,
    for_model,
    system_message,
)

MAX_SHARE = 0.25
MIN_PRESSURE = 4  # the raw history is at least this many times the budget


@dataclass
class Outcome:
    scenario: str
    covers: str
    facts: dict[str, bool]
    pairs_intact: bool
    budget_tokens: int
    full_bytes: int
    full_tokens: int
    request_bytes: int
    request_tokens: int
    error: str | None = None

    @property
    def share(self) -> float:
        return self.request_bytes / self.full_bytes

    @property
    def passed(self) -> bool:
        return (self.error is None and all(self.facts.values()) and self.pairs_intact
                and self.request_tokens <= self.budget_tokens and self.share <= MAX_SHARE
                and self.full_tokens >= MIN_PRESSURE * self.budget_tokens)


def evaluate(scenario: Scenario, tool_bytes: int = DEFAULT_TOOL_BYTES) -> Outcome:
    full = [system_message(SYSTEM_PROMPT), *scenario.history]
    full_bytes = sum(entry_bytes(entry) for entry in full)
    try:
        request = for_model(build_context(full, budget_tokens=scenario.budget_tokens, tool_bytes=tool_bytes))
    except ContextOverflow as exc:
        return Outcome(scenario.name, scenario.covers, {f.describe(): False for f in scenario.facts}, False,
                       scenario.budget_tokens, full_bytes, estimate_tokens(full), 0, 0, str(exc))
    return Outcome(scenario.name, scenario.covers, {f.describe(): f.present(request) for f in scenario.facts},
                   pairs_intact(request), scenario.budget_tokens, full_bytes, estimate_tokens(full),
                   sum(entry_bytes(entry) for entry in request), estimate_tokens(request))


def run(tool_bytes: int = DEFAULT_TOOL_BYTES) -> list[Outcome]:
    return [evaluate(scenario, tool_bytes) for scenario in all_scenarios()]


def table(outcomes: list[Outcome]) -> str:
    """The Markdown table of docs/OPERATIONS.md, "Context under budget pressure"."""
    rows = ["| scenario | covers | facts present | pairs intact | full history (bytes / ~tokens) "
            "| request as sent (bytes / ~tokens) | share | budget | pass |",
            "|---|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        rows.append(f"| `{o.scenario}` | {o.covers} | {sum(o.facts.values())}/{len(o.facts)} | "
                    f"{'yes' if o.pairs_intact else 'no'} | {o.full_bytes} / {o.full_tokens} | "
                    f"{o.request_bytes} / {o.request_tokens} | {o.share:.1%} | {o.budget_tokens} | "
                    f"{'yes' if o.passed else 'NO'} |")
    passed = sum(o.passed for o in outcomes)
    rows.append(f"\n{passed}/{len(outcomes)} scenarios pass (every fact present, pairs intact, request within "
                f"the budget and at most {MAX_SHARE:.0%} of the full history).")
    return "\n".join(rows)


def details(outcomes: list[Outcome]) -> str:
    lines = []
    for o in outcomes:
        lines.append(f"{o.scenario}: {'pass' if o.passed else 'FAIL'}" + (f" ({o.error})" if o.error else ""))
        lines += [f"  [{'x' if ok else ' '}] {fact}" for fact, ok in o.facts.items()]
    return "\n".join(lines)


def main(*, as_json: bool = False, verbose: bool = False, tool_bytes: int = DEFAULT_TOOL_BYTES) -> int:
    """Print the report; 0 when every scenario passes, 1 otherwise."""
    outcomes = run(tool_bytes)
    if as_json:
        print(json.dumps([{**asdict(o), "share": round(o.share, 4), "passed": o.passed} for o in outcomes],
                         ensure_ascii=False, indent=1))
    else:
        print(table(outcomes))
        if verbose:
            print("\n" + details(outcomes))
    return 0 if all(o.passed for o in outcomes) else 1
