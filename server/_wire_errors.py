"""The error responses of the OpenAPI document, read off the one error-code table
(``_error_codes.TABLE``): per API flavour and status, which codes can come, with an example of
each rendered by ``_errors.error_payload`` itself — so each flavour's body shape and status (429
for 503 on the compatibility APIs, 403 for 401 on LibreTranslate and DeepL) cannot drift from what
the server sends."""

from __future__ import annotations

from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

from ._error_codes import FLAVOURS, TABLE, Code
from ._errors import ApiError, error_payload

Schema = dict[str, Any]
JSON = "application/json"

STATUS_HEADERS = {503: ("Retry-After",), 405: ("Allow",)}
ERROR_SCHEMAS = {
    "native": "ErrorResponse",
    "openai": "OpenAIErrorResponse",
    "libretranslate": "LibreTranslateError",
    "deepl": "DeepLError",
}


def example_error(code: Code) -> ApiError:
    """The error a row of the table describes, as the server would raise it."""
    return ApiError(code.example, code=code.code, param=code.param, details=dict(code.details))


def codes_of(flavour: str, status: int) -> list[Code]:
    return [c for c in TABLE if c.status == status and flavour in c.flavours and c.answered]


def sent_status(flavour: str, status: int) -> int:
    """The status a flavour's clients get for one of liuyi's statuses."""
    return error_payload(example_error(codes_of(flavour, status)[0]), flavour)[0]


def error_response(flavour: str, status: int) -> Schema:
    codes = codes_of(flavour, status)
    sent = sent_status(flavour, status)
    note = f" (liuyi's {status}; sent as {sent}, as the original service does)" if sent != status else ""
    examples = {
        c.code: {
            "summary": c.code,
            "description": c.meaning,
            "value": error_payload(example_error(c), flavour)[1],
        }
        for c in codes
    }
    return {
        "description": f"{HTTPStatus(sent).phrase}{note}: " + ", ".join(f"`{c.code}`" for c in codes) + ".",
        "headers": {
            name: {"$ref": f"#/components/headers/{name}"} for name in STATUS_HEADERS.get(status, ())
        },
        "content": {
            JSON: {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMAS[flavour]}"}, "examples": examples}
        },
    }


def error_refs(flavour: str, statuses: Iterable[int]) -> dict[str, Schema]:
    """The ``responses`` entries of an operation that can fail with ``statuses`` (liuyi's own)."""
    refs = {}
    for status in statuses:
        sent = sent_status(flavour, status)
        refs[str(sent)] = {"$ref": f"#/components/responses/{flavour}_{sent}"}
    return refs


def error_components() -> dict[str, Schema]:
    statuses = sorted({c.status for c in TABLE})
    return {
        f"{flavour}_{sent_status(flavour, status)}": error_response(flavour, status)
        for flavour in FLAVOURS
        for status in statuses
        if codes_of(flavour, status)
    }


def error_code_schema() -> Schema:
    return {
        "type": "string",
        "description": "Stable machine-readable error code: branch on it, not on messages.",
        "oneOf": [{"const": c.code, "description": f"HTTP {c.status}. {c.meaning}"} for c in TABLE],
    }
