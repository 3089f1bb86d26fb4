"""Every wire model's JSON Schema is pinned in schemas.snapshot.json, so an incompatible change fails here.

A deliberate change: rerun with ERPILOT_UPDATE_SNAPSHOTS=1 and review the diff. A breaking change to a
message belongs in a new ``v2`` module beside ``v1``, not in an edit of ``v1``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
from pathlib import Path

import pytest
from pydantic import BaseModel

import erpilot_contracts
from erpilot_contracts.tools.v1 import TOOLS

pytestmark = pytest.mark.unit
SNAPSHOT = Path(__file__).with_name("schemas.snapshot.json")


def current_schemas() -> dict[str, dict]:
    schemas: dict[str, dict] = {}
    for module_info in pkgutil.walk_packages(erpilot_contracts.__path__, "erpilot_contracts."):
        module = importlib.import_module(module_info.name)
        for name, obj in inspect.getmembers(module, inspect.isclass):
            # A parametrised generic (``RootModel[dict]``) is only the base of a named model, pinned by that name.
            parametrised = getattr(obj, "__pydantic_generic_metadata__", {}).get("origin") is not None
            if issubclass(obj, BaseModel) and obj.__module__ == module.__name__ and not parametrised:
                schemas[f"{module.__name__}.{name}"] = obj.model_json_schema()
    for tool in TOOLS.values():
        schemas[f"tool:{tool.name}:v{tool.schema_version}"] = tool.input_schema()
    return dict(sorted(schemas.items()))


def test_every_message_has_a_schema_version():
    from erpilot_contracts.base import Message

    versioned = [name for name, schema in current_schemas().items() if "schema_version" in schema.get("properties", {})]
    messages = [
        f"{cls.__module__}.{cls.__name__}" for module_info in pkgutil.walk_packages(erpilot_contracts.__path__,
                                                                                    "erpilot_contracts.")
        for _, cls in inspect.getmembers(importlib.import_module(module_info.name), inspect.isclass)
        if issubclass(cls, Message) and cls.__module__ == module_info.name
    ]
    assert messages and set(messages) <= set(versioned)


def test_wire_schemas_match_the_snapshot():
    schemas = current_schemas()
    if os.environ.get("ERPILOT_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(schemas, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(SNAPSHOT.read_text())
    changed = sorted(name for name in pinned.keys() & schemas.keys() if pinned[name] != schemas[name])
    removed = sorted(pinned.keys() - schemas.keys())
    added = sorted(schemas.keys() - pinned.keys())
    assert not (changed or removed or added), (
        f"wire contracts changed: changed={changed} removed={removed} added={added}. If intended, run with "
        "ERPILOT_UPDATE_SNAPSHOTS=1 and commit schemas.snapshot.json (breaking changes go to a v2 module)."
    )
