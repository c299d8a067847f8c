"""The JSON Schemas generated from the declared models: repro.toml's (schema/repro.schema.json,
from `kernodeck.manifest.schema`) and the JSON report's (schema/report.schema.json, from
`kernodeck.report`)."""

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


REPORT_SCHEMA_ID = "https://kernodeck.dev/schema/report.schema.json"


def report_schema_dict() -> dict[str, Any]:
    """The JSON Schema of a report (`verify --json`): the declared `Report` and `Step`, with the
    layers, statuses and step causes as enums."""
    from kernodeck.layers.causes import StepCause
    from kernodeck.manifest.model import describe
    from kernodeck.report import REPORT_SCHEMA, Report

    describe("kernodeck.report")
    body = pydantic_model(Report).model_json_schema(by_alias=True, mode="validation")
    defs = body.setdefault("$defs", {})
    defs["StepCause"] = {
        "description": "The values of a step's `details.cause` (kernodeck.layers.causes.StepCause).",
        "enum": [c.value for c in StepCause],
        "type": "string",
    }
    details = defs["Step"]["properties"]["details"]
    details["properties"] = {
        "cause": {
            "type": "string",
            "description": "Why the step failed, warned or was skipped: in verify and check reports "
            "one of StepCause; rebuild's install stage names the installer's failure "
            "(kernodeck.handover.installer_errors), doctor the probe's status.",
        }
    }
    body["properties"]["schema"]["const"] = REPORT_SCHEMA
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": REPORT_SCHEMA_ID,
        "title": f"Kernodeck report ({REPORT_SCHEMA})",
        **{k: v for k, v in body.items() if k != "title"},
    }


def report_schema_text() -> str:
    return json.dumps(report_schema_dict(), indent=2, sort_keys=True) + "\n"
