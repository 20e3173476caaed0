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
# What clients may send for each language (decoding/_languages.py; case-insensitive, "_" == "-").
LANGUAGE_ALIASES = {
    "zh": ("zh", "zh-CN", "zh-Hans", "zh-SG", "zh-TW", "zh-Hant", "zh-HK", "cmn", "zho", "chi", "chinese"),
    "en": ("en", "en-US", "en-GB", "eng", "english"),
}


def language_names(languages: Collection[str]) -> list[str]:
    """Every spelling of the languages this app's models translate from (or into)."""
    return [alias for lang, aliases in LANGUAGE_ALIASES.items() if lang in languages for alias in aliases]


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


def sse_event(description: str, data: Schema, **fields: Schema) -> Schema:
    """One server-sent event, as OpenAPI 3.2 describes an event stream's items (``data`` is a string
    whose JSON content is ``data``'s schema); heartbeats are comment lines, which are not events."""
    return {
        "type": "object",
        "description": description,
        "properties": {**fields, "data": data},
        "required": ["data", *fields],
    }


def json_text(schema: Schema) -> Schema:
    """A string holding a JSON value that matches ``schema`` (an SSE event's ``data``)."""
    return {"type": "string", "contentMediaType": JSON, "contentSchema": schema}


def fields_body(schema: Schema, form_schema: Schema | None = None, **examples: Any) -> Schema:
    """A request body sent as JSON or as form fields (LibreTranslate, DeepL). Form fields are
    strings: ``form_schema`` is the variant without JSON's nulls."""
    forms = {kind: {"schema": form_schema or schema} for kind in FORM_TYPES}
    return {"required": True, "content": {**json_content(schema, **examples), **forms}}


def form_fields(schema: Schema) -> Schema:
    """``schema`` as form fields can carry it: strings, never JSON's null, and a list only of two or
    more (a list of one is the same single field as a plain value)."""
    result: Schema = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, list):
            value = [kind for kind in value if kind != "null"]
        elif key == "enum":
            value = [item for item in value if item is not None]
        elif key == "anyOf":
            value = [
                {**b, "minItems": 2} if b.get("type") == "array" else form_fields(b)
                for b in value
                if b.get("type") != "null"
            ]
        elif isinstance(value, dict):
            value = form_fields(value)
        result[key] = value
    return result


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
