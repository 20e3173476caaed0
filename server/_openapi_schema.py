"""The vocabulary of the OpenAPI document (``_openapi.py``): schema helpers, the error-code table,
error responses per API flavour, and the security schemes.

Error examples are rendered by ``_errors.error_payload`` itself, so each flavour's body shape and
status (429 for 503 on the compatibility APIs, 403 for 401 on LibreTranslate and DeepL) cannot
drift from what the server sends.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from http import HTTPStatus
from typing import Any

from ._error_codes import FLAVOURS, TABLE, Code
from ._errors import ApiError, error_payload
from ._settings import Settings

Schema = dict[str, Any]
JSON = "application/json"
SSE = "text/event-stream"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def ref(name: str, description: str | None = None) -> Schema:
    schema: Schema = {"$ref": f"#/components/schemas/{name}"}
    if description:
        schema["description"] = description
    return schema


def header_ref(name: str) -> Schema:
    return {"$ref": f"#/components/headers/{name}"}


def prop(kind: str | list[str], description: str, **extra: Any) -> Schema:
    return {"type": kind, "description": description, **extra}


def obj(
    description: str, properties: dict[str, Schema], *, optional: Collection[str] = (), **extra: Any
) -> Schema:
    """An object schema whose properties are all required except those named in ``optional``."""
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "required": [name for name in properties if name not in optional],
        **extra,
    }


def array(items: Schema, description: str, **extra: Any) -> Schema:
    return {"type": "array", "items": items, "description": description, **extra}


def one_or_many(items: Schema, description: str) -> Schema:
    """A value or a list of them (LibreTranslate's ``q``, DeepL's ``text``)."""
    return {"description": description, "anyOf": [items, {"type": "array", "items": items, "minItems": 1}]}


def json_content(schema: Schema, **examples: Any) -> Schema:
    content: Schema = {"schema": schema}
    if examples:
        content["examples"] = {name: {"value": value} for name, value in examples.items()}
    return {JSON: content}


def json_response(description: str, schema: Schema, headers: Iterable[str] = (), **examples: Any) -> Schema:
    response: Schema = {"description": description, "content": json_content(schema, **examples)}
    if headers:
        response["headers"] = {name: header_ref(name) for name in headers}
    return response


def fields_body(schema: Schema, **examples: Any) -> Schema:
    """A request body sent as JSON or as form fields (LibreTranslate, DeepL)."""
    forms = {kind: {"schema": schema} for kind in FORM_TYPES}
    return {"required": True, "content": {**json_content(schema, **examples), **forms}}


def operation(
    tag: str, op_id: str, summary: str, description: str, responses: Schema, **extra: Any
) -> Schema:
    return {
        "tags": [tag],
        "operationId": op_id,
        "summary": summary,
        "description": description,
        **extra,
        "responses": responses,
    }


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
        "headers": {name: header_ref(name) for name in STATUS_HEADERS.get(status, ())},
        "content": {JSON: {"schema": ref(ERROR_SCHEMAS[flavour]), "examples": examples}},
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


# ---------------------------------------------------------------------------------------------
# Security

SCHEMES = {
    "bearerAuth": {"type": "http", "scheme": "bearer", "description": "`Authorization: Bearer <key>`."},
    "apiKeyHeader": {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "`X-API-Key: <key>`.",
    },
    "apiKeyQuery": {
        "type": "apiKey",
        "in": "query",
        "name": "api_key",
        "description": "`?api_key=<key>`, for clients that cannot set headers (a browser's `EventSource`). "
        "URLs end up in logs: prefer a header.",
    },
    "deeplAuthKey": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`Authorization: DeepL-Auth-Key <key>`, as DeepL clients send it.",
    },
}


def security(settings: Settings) -> list[Schema]:
    """Any scheme works on any secured endpoint; with no keys configured, none is needed (``{}``)."""
    return [{name: []} for name in SCHEMES] + ([] if settings.auth_required else [{}])
