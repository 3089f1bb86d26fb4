"""What one `erpilot torture` run will do, drawn before it starts: a seeded mix of tool calls and decisions.

A run's choices (which tools, which arguments, which decisions, when) come from the run's target and seed alone,
so `--failpoint F --seed S --runs 1` on a fresh stack does what run S did in any campaign: nothing carries over
from earlier runs. Pure: ``workload`` carries a plan out.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

CUSTOMERS = ("C-1001", "C-1002", "C-1004", "C-1005")
SKUS = ("SKU-PAPER-A4", "SKU-STAPLES", "SKU-BINDER-A4", "SKU-CABLE-HDMI-2M", "SKU-MARKER-SET")
KINDS = ("order", "order", "adjust", "cancel", "refund")
INTENTS = {"order": ("approve", "approve", "reject"), "adjust": ("approve", "reject", "edit", "expire"),
           "cancel": ("approve", "reject"), "refund": ("approve", "reject", "edit")}
REFUND_CAP = 400


@dataclass(frozen=True)
class Action:
    """One planned step of a run, with every choice already drawn."""

    kind: str  # order | adjust | cancel | refund
    intent: str  # approve | reject | edit | expire
    delay: float  # seconds after the run starts (the steps run concurrently)
    customer: str = ""
    lines: tuple[tuple[str, int], ...] = ()  # an order's (sku, qty)
    sku: str = ""  # adjust_stock
    delta: int = 0
    order: int = -1  # cancel/refund: the index of the prepared order it acts on
    share: float = 0.0  # refund: the fraction of the order's refundable amount (up to REFUND_CAP)


@dataclass(frozen=True)
class Plan:
    """A run's workload: the orders it places before arming (to cancel or refund), then its actions."""

    people: str  # the run's part of every person's name
    orders: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # (customer, lines) placed and approved first
    actions: tuple[Action, ...]




def plan(target: str, seed: int) -> Plan:
    """The run of `target` with `seed`: 3-5 actions, always an approved order (it passes every failpoint of a
    write: prepare, request, decide, commit, the outboxes) and an edited stock adjustment (the edit's points),
    drawn from the target and the seed alone."""
    rng = random.Random(f"{target}:{seed}")
    kinds = [("order", "approve"), ("adjust", "edit")]
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(KINDS)
        kinds.append((kind, rng.choice(INTENTS[kind])))
    rng.shuffle(kinds)
    orders: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    actions = []
    for kind, intent in kinds:
        delay = round(rng.random() * 0.3, 3)
        if kind == "order":
            actions.append(Action(kind, intent, delay, customer=rng.choice(CUSTOMERS), lines=_lines(rng)))
        elif kind == "adjust":
            actions.append(Action(kind, intent, delay, sku=rng.choice(SKUS), delta=rng.randint(1, 9)))
        else:  # cancel or refund an order of its own, placed before the failpoint is armed
            orders.append((rng.choice(CUSTOMERS), _lines(rng)))
            actions.append(Action(kind, intent, delay, order=len(orders) - 1, share=rng.random()))
    people = hashlib.sha256(f"{target}:{seed}".encode()).hexdigest()[:12]
    return Plan(people, tuple(orders), tuple(actions))


def _lines(rng: random.Random) -> tuple[tuple[str, int], ...]:
    return tuple((sku, rng.randint(1, 3)) for sku in rng.sample(SKUS, rng.randint(1, 2)))
