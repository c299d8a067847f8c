"""The JSON Schema of repro.toml, generated from the schema's pydantic models (schema/repro.schema.json)."""

from __future__ import annotations

import json
from typing import Any

from kernodeck.manifest.model import pydantic_model
from kernodeck.manifest.schema import Manifest, describe_fields

SCHEMA_ID = "https://kernodeck.dev/schema/repro.schema.json"


def schema_dict() -> dict[str, Any]:
    describe_fields()
    body = pydantic_model(Manifest).model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Kernodeck reproduction manifest (repro.toml), schema v1",
        **{k: v for k, v in body.items() if k != "title"},
    }


def schema_text() -> str:
    return json.dumps(schema_dict(), indent=2, sort_keys=True) + "\n"
