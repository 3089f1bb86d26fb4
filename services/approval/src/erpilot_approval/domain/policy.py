"""The approval policy of SPEC §6: a TOML file merged key by key over the built-in defaults."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from erpilot_approval.domain import policy_values as parse
from erpilot_approval.domain.chat import parse_chat_url
from erpilot_approval.domain.people import Contact, parse_contacts, parse_people
from erpilot_approval.domain.policy_values import PolicyError
from erpilot_approval.domain.standing_runs import DEFAULT_MAX_WRITES_PER_RUN
from erpilot_approval.domain.webhooks import Webhook, WebhookConfigError, parse_webhooks
from erpilot_contracts.tools.v1 import TOOLS, ToolKind

ACTIONS = ("allow", "require_approval", "deny")
STOCK_CHECKS = ("exact", "sufficient")
DEFAULT_TTL = timedelta(minutes=15)

_TOP_KEYS = ("defaults", "tools", "webhooks", "people", "channels", "standing")
_STANDING_KEYS = ("max_writes_per_run",)
_DEFAULTS_KEYS = ("ttl",)
_TOOL_KEYS = ("action", "roles", "ttl", "separation_of_duties", "rules", "stock_check", "warn_before",
              "approvals_required", "rejections_to_reject", "escalate_after", "escalate_to")
_RULE_KEYS = ("min_amount_minor", "roles", "warn_before", "approvals_required", "rejections_to_reject",
              "escalate_after", "escalate_to")
_QUORUM_KEYS = ("approvals_required", "rejections_to_reject")
_ESCALATION_KEYS = ("escalate_after", "escalate_to")


@dataclass(frozen=True)
class AmountRule:
    """From ``min_amount_minor`` upwards, only ``roles`` may decide."""

    min_amount_minor: int
    roles: tuple[str, ...]
    warn_before: timedelta | None = None  # replaces the tool's warn_before from this amount upwards
    approvals_required: int | None = None  # replaces the tool's quorum from this amount upwards
    rejections_to_reject: int | None = None  # replaces the tool's from this amount upwards
    escalate_after: timedelta | None = None  # replaces the tool's escalation time from this amount upwards
    escalate_to: str | None = None  # replaces the tool's escalation role from this amount upwards


@dataclass(frozen=True)
class ToolPolicy:
    """What the policy says about one tool."""

    action: str
    roles: tuple[str, ...]
    ttl: timedelta
    separation_of_duties: bool = False
    rules: tuple[AmountRule, ...] = ()
    stock_check: str | None = None  # only submit_order has one
    warn_before: timedelta | None = None  # approval_expiring this long before the deadline; None: no warning
    approvals_required: int = 1  # quorum: distinct people who must approve the same fingerprint
    rejections_to_reject: int = 1  # distinct people whose rejects end it rejected (1: the first reject)
    escalate_after: timedelta | None = None  # an approval still undecided this long after it was stored ...
    escalate_to: str | None = None  # ... may be decided by this role too (once); None: no escalation

    def required_roles(self, amount_minor: int | None) -> list[str]:
        """The roles that may decide: the highest matching amount rule's, else the tool's."""
        rule = self._rule_for(amount_minor)
        return list(rule.roles if rule is not None else self.roles)

    def warn_before_for(self, amount_minor: int | None) -> timedelta | None:
        """The warning time: the highest matching amount rule's ``warn_before`` if it sets one, else the tool's."""
        return self._setting("warn_before", amount_minor)

    def approvals_required_for(self, amount_minor: int | None) -> int:
        """The quorum: the highest matching amount rule's ``approvals_required`` if it sets one, else the tool's."""
        return self._setting("approvals_required", amount_minor)

    def rejections_to_reject_for(self, amount_minor: int | None) -> int:
        """Rejects that end it: the highest matching amount rule's ``rejections_to_reject`` if set, else the tool's."""
        return self._setting("rejections_to_reject", amount_minor)

    def escalation_for(self, amount_minor: int | None) -> tuple[timedelta, str] | None:
        """``(escalate_after, escalate_to)``: each the highest matching amount rule's if it sets it, else the
        tool's; None when there is no escalation (``load_policy`` refuses half of one)."""
        after, role = self._setting("escalate_after", amount_minor), self._setting("escalate_to", amount_minor)
        return (after, role) if after is not None and role is not None else None

    def longest_warning(self) -> timedelta | None:
        """The earliest any approval of this tool may be warned (None: never)."""
        times = [t for t in (self.warn_before, *(rule.warn_before for rule in self.rules)) if t is not None]
        return max(times, default=None)

    def _rule_for(self, amount_minor: int | None) -> AmountRule | None:
        if amount_minor is None:
            return None
        matching = [rule for rule in self.rules if amount_minor >= rule.min_amount_minor]
        return max(matching, key=lambda rule: rule.min_amount_minor) if matching else None

    def _setting(self, name: str, amount_minor: int | None) -> Any:
        """The highest matching amount rule's ``name`` when it sets one, else the tool's own."""
        rule = self._rule_for(amount_minor)
        value = getattr(rule, name) if rule is not None else None
        return value if value is not None else getattr(self, name)


@dataclass(frozen=True)
class Policy:
    """The merged policy in force, with a short stable ``version`` hash."""

    tools: dict[str, ToolPolicy]
    default_ttl: timedelta = DEFAULT_TTL
    version: str = field(default="", compare=False)
    webhooks: tuple[Webhook, ...] = ()
    people: dict[str, tuple[str, ...]] | None = None  # [people.<sub>] roles (``domain.people``); None: no table
    contacts: dict[str, Contact] = field(default_factory=dict)  # [people.<sub>] email / chat_id
    chat_url: str | None = None  # [channels.chat] url: where approval cards are posted (``domain.chat``)
    # [standing] max_writes_per_run: the writes of one chat run standing approvals approve (``domain.standing_runs``)
    max_writes_per_run: int = DEFAULT_MAX_WRITES_PER_RUN

    def for_tool(self, name: str) -> ToolPolicy:
        """The tool's policy; a tool not in the catalog is denied."""
        return self.tools.get(name) or ToolPolicy(action="deny", roles=(), ttl=self.default_ttl)

    def required_roles(self, tool: str, amount_minor: int | None = None) -> list[str]:
        """Who may decide a call of ``tool`` whose preview shows ``amount_minor``."""
        return self.for_tool(tool).required_roles(amount_minor)


def load_policy(text: str | None) -> Policy:
    """Parse a policy file (None or empty: the defaults) and merge it over the built-in defaults."""
    raw = parse.parse_toml(text or "")
    parse.reject_unknown_keys(raw, _TOP_KEYS, "")
    defaults = parse.table(raw.get("defaults", {}), "defaults")
    parse.reject_unknown_keys(defaults, _DEFAULTS_KEYS, "defaults.")
    default_ttl = parse.duration(defaults["ttl"], "defaults.ttl") if "ttl" in defaults else DEFAULT_TTL

    overrides = parse.table(raw.get("tools", {}), "tools")
    for name in overrides:
        if name not in TOOLS:
            raise PolicyError(f"tools.{name}: unknown tool (known: {', '.join(TOOLS)})")

    tools = {}
    for name in TOOLS:
        merged = {"ttl": default_ttl, **_builtin(name), **_tool_table(name, overrides.get(name, {}))}
        tools[name] = ToolPolicy(**merged)
        if tools[name].action == "require_approval" and not tools[name].roles:
            raise PolicyError(f"tools.{name}.roles: require_approval needs at least one role")
        _check_escalation(f"tools.{name}", tools[name], overrides.get(name, {}))
    try:
        webhooks = parse_webhooks(raw.get("webhooks", []), "webhooks")
    except WebhookConfigError as exc:
        raise PolicyError(str(exc)) from None
    people = parse_people(raw["people"]) if "people" in raw else None
    contacts = parse_contacts(raw["people"]) if "people" in raw else {}
    chat_url = parse_chat_url(raw["channels"]) if "channels" in raw else None
    return Policy(tools=tools, default_ttl=default_ttl, version=_version(tools), webhooks=webhooks, people=people,
                  contacts=contacts, chat_url=chat_url, max_writes_per_run=_max_writes_per_run(raw))


def _max_writes_per_run(raw: dict[str, Any]) -> int:
    """``[standing] max_writes_per_run``: a whole number, 0 or more (0: standing approvals approve no chat run's
    writes, only direct calls'); default ``DEFAULT_MAX_WRITES_PER_RUN``."""
    standing = parse.table(raw.get("standing", {}), "standing")
    parse.reject_unknown_keys(standing, _STANDING_KEYS, "standing.")
    value = standing.get("max_writes_per_run", DEFAULT_MAX_WRITES_PER_RUN)
    if type(value) is not int or value < 0:  # bool is an int in Python; `true` is not a count
        raise PolicyError(f"standing.max_writes_per_run: expected an integer >= 0, got {value!r}")
    return value


def parse_duration(value: Any, path: str) -> timedelta:
    """A duration as the policy writes it ("2s", "90s", "15m", "24h")."""
    return parse.duration(value, path)


def _builtin(name: str) -> dict[str, Any]:
    """The SPEC §6 defaults for one tool, from its catalog traits: reads and drafts allowed, a write needs its
    ``default_roles`` (narrowed by its ``default_amount_rule``), and no party to a write (its requester, any editor)
    may approve it (SPEC §10: separation of duties is the default for every write tool; a policy turns it off per
    tool with ``separation_of_duties = false``)."""
    spec = TOOLS[name]
    if spec.kind is not ToolKind.WRITE:
        return {"action": "allow", "roles": ()}
    traits = spec.traits
    builtin: dict[str, Any] = {"action": "require_approval", "separation_of_duties": True,
                               "roles": traits.default_roles}
    if traits.default_amount_rule is not None:
        builtin["rules"] = (AmountRule(*traits.default_amount_rule),)
    if traits.takes_stock_check:
        builtin["stock_check"] = "exact"
    return builtin


def _tool_table(name: str, value: Any) -> dict[str, Any]:
    """Validate one ``[tools.<name>]`` table and return only the keys it sets, typed."""
    prefix = f"tools.{name}"
    table = parse.table(value, prefix)
    parse.reject_unknown_keys(table, _TOOL_KEYS, prefix + ".")
    parsed: dict[str, Any] = {}
    for key, item in table.items():
        path = f"{prefix}.{key}"
        if key == "action":
            parsed[key] = parse.choice(item, ACTIONS, path)
        elif key == "roles":
            parsed[key] = parse.roles(item, path, allow_empty=True)
        elif key in ("ttl", "warn_before", "escalate_after"):
            parsed[key] = parse.duration(item, path)
        elif key == "escalate_to":
            parsed[key] = parse.choice(item, parse.ROLES, path)
        elif key == "separation_of_duties":
            if not isinstance(item, bool):
                raise PolicyError(f"{path}: expected true or false, got {item!r}")
            parsed[key] = item
        elif key == "rules":
            parsed[key] = _rules(item, path)
        elif key in _QUORUM_KEYS:
            parsed[key] = parse.quorum(item, path)
        elif key == "stock_check":
            if not TOOLS[name].traits.takes_stock_check:
                takers = ", ".join(f"tools.{n}" for n, spec in TOOLS.items() if spec.traits.takes_stock_check)
                raise PolicyError(f"{path}: only {takers} takes stock_check")
            parsed[key] = parse.choice(item, STOCK_CHECKS, path)
    return parsed


def _rules(value: Any, path: str) -> tuple[AmountRule, ...]:
    if not isinstance(value, list):
        raise PolicyError(f"{path}: expected a list of tables ([[{path}]]), got {value!r}")
    rules: list[AmountRule] = []
    for index, item in enumerate(value):
        rule_path = f"{path}[{index}]"
        table = parse.table(item, rule_path)
        parse.reject_unknown_keys(table, _RULE_KEYS, rule_path + ".")
        for key in ("min_amount_minor", "roles"):
            if key not in table:
                raise PolicyError(f"{rule_path}.{key}: missing")
        amount = table["min_amount_minor"]
        # bool is an int in Python; `true` is not an amount.
        if type(amount) is not int or amount < 0:
            raise PolicyError(f"{rule_path}.min_amount_minor: expected an integer >= 0, got {amount!r}")
        if any(rule.min_amount_minor == amount for rule in rules):
            raise PolicyError(f"{rule_path}.min_amount_minor: threshold {amount} appears twice")
        warn = parse.duration(table["warn_before"], f"{rule_path}.warn_before") if "warn_before" in table else None
        quorum = {key: parse.quorum(table[key], f"{rule_path}.{key}") for key in _QUORUM_KEYS if key in table}
        escalation = {}
        if "escalate_after" in table:
            escalation["escalate_after"] = parse.duration(table["escalate_after"], f"{rule_path}.escalate_after")
        if "escalate_to" in table:
            escalation["escalate_to"] = parse.choice(table["escalate_to"], parse.ROLES, f"{rule_path}.escalate_to")
        rules.append(AmountRule(amount, parse.roles(table["roles"], f"{rule_path}.roles", allow_empty=False), warn,
                                **quorum, **escalation))
    return tuple(sorted(rules, key=lambda rule: rule.min_amount_minor))


def _check_escalation(prefix: str, tool: ToolPolicy, table: Any) -> None:
    """Escalation comes whole (``escalate_after`` with ``escalate_to``, each from the rule or the tool) and before
    the deadline (an ``escalate_after`` at or beyond the ttl would never fire: the approval expires first).
    Errors name the key in the file (rules by their place there)."""
    places = [(prefix, tool.escalate_after, tool.escalate_to, _ESCALATION_KEYS)]
    rules = table.get("rules", []) if isinstance(table, dict) else []
    for index, rule in enumerate(rules):
        own = tuple(key for key in _ESCALATION_KEYS if key in rule)
        if own:
            after = parse.duration(rule["escalate_after"], "") if "escalate_after" in rule else tool.escalate_after
            places.append((f"{prefix}.rules[{index}]", after, rule.get("escalate_to", tool.escalate_to), own))
    for path, after, role, named in places:
        if after is None and role is None:
            continue
        if role is None:
            raise PolicyError(f"{path}.escalate_to: missing (escalate_after needs a role to escalate to)")
        if after is None:
            raise PolicyError(f"{path}.escalate_after: missing (escalate_to needs a time to escalate after)")
        if after >= tool.ttl:
            where = path if "escalate_after" in named else prefix
            raise PolicyError(f"{where}.escalate_after: {_text(after)} is not shorter than the ttl "
                              f"{_text(tool.ttl)}: the approval would expire before it escalates")


def _text(duration: timedelta) -> str:
    return f"{int(duration.total_seconds())}s"


def _version(tools: dict[str, ToolPolicy]) -> str:
    """``sha256:`` + 16 hex of the canonical JSON of the merged policy: equal policies, equal versions."""
    canonical = {
        name: {
            "action": tool.action,
            "roles": list(tool.roles),
            "ttl_seconds": int(tool.ttl.total_seconds()),
            "separation_of_duties": tool.separation_of_duties,
            "rules": [{"min_amount_minor": r.min_amount_minor, "roles": list(r.roles),
                       **({"warn_before_seconds": int(r.warn_before.total_seconds())} if r.warn_before else {}),
                       **({"approvals_required": r.approvals_required} if r.approvals_required else {}),
                       **({"rejections_to_reject": r.rejections_to_reject} if r.rejections_to_reject else {}),
                       **({"escalate_after_seconds": int(r.escalate_after.total_seconds())}
                          if r.escalate_after else {}),
                       **({"escalate_to": r.escalate_to} if r.escalate_to else {})}
                      for r in tool.rules],
            "stock_check": tool.stock_check,
            **({"warn_before_seconds": int(tool.warn_before.total_seconds())} if tool.warn_before else {}),
            **({"approvals_required": tool.approvals_required} if tool.approvals_required != 1 else {}),
            **({"rejections_to_reject": tool.rejections_to_reject} if tool.rejections_to_reject != 1 else {}),
            **({"escalate_after_seconds": int(tool.escalate_after.total_seconds())} if tool.escalate_after else {}),
            **({"escalate_to": tool.escalate_to} if tool.escalate_to else {}),
        }
        for name, tool in sorted(tools.items())
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]
