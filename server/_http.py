"""Reading requests safely: size limits before parsing, media types, field shapes, API keys.

Bytes become values in ``_decode`` (strict UTF-8, bounded JSON nesting); this module decides which
decoder a request needs and what its fields must look like."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from starlette.requests import ClientDisconnect, Request

from ._decode import Fields, decode_json, decode_multipart, decode_query, decode_urlencoded
from ._error_codes import ErrorCode
from ._errors import BadRequest, ClientClosedRequest, PayloadTooLarge, Unauthorized, UnsupportedMediaType
from ._settings import Settings

JSON_TYPES = ("application/json",)
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def read_body(request: Request, settings: Settings) -> bytes:
    """The raw body, refused with 413 as soon as it is known to exceed the limit (before parsing,
    and without reading the rest of an over-long body)."""
    limit = settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(
            f"request body is {declared} bytes; the limit is {limit}", details={"limit": limit}
        )
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"request body exceeds {limit} bytes", details={"limit": limit})
            chunks.append(chunk)
    except ClientDisconnect:  # the client went away mid-body: its problem, not a server error
        raise ClientClosedRequest("the client closed the connection while sending the body") from None
    return b"".join(chunks)


async def read_json_object(request: Request, settings: Settings) -> dict[str, Any]:
    """A JSON object body. 415 for another media type, 400 for bad JSON or a non-object."""
    if media_type(request) not in JSON_TYPES:
        raise UnsupportedMediaType(
            f"send the body as application/json (got {media_type(request) or 'no content type'})"
        )
    return parse_json_object(await read_body(request, settings))


def parse_json_object(body: bytes) -> dict[str, Any]:
    value = decode_json(body)
    if not isinstance(value, dict):
        raise BadRequest("the body must be a JSON object", code=ErrorCode.INVALID_JSON)
    return value


async def read_fields(request: Request, settings: Settings) -> Mapping[str, Any]:
    """JSON object or form fields (LibreTranslate and DeepL clients send either). A form field sent
    several times becomes a list, as DeepL's repeated ``text`` needs."""
    kind = media_type(request)
    if kind in JSON_TYPES:
        return await read_json_object(request, settings)
    if kind in FORM_TYPES:
        body = await read_body(request, settings)
        if kind == "multipart/form-data":
            return grouped(decode_multipart(body, request.headers.get("content-type", "")))
        return grouped(decode_urlencoded(body))
    raise UnsupportedMediaType(f"send JSON or form data (got {kind or 'no content type'})")


def query_fields(request: Request) -> dict[str, Any]:
    """The query string's parameters, decoded strictly (Starlette's ``query_params`` replaces
    invalid UTF-8 silently); a parameter given several times becomes a list."""
    return grouped(decode_query(request.scope.get("query_string", b"")))


def grouped(pairs: Fields) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key, value in pairs:
        if key in fields:
            previous = fields[key]
            fields[key] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            fields[key] = value
    return fields


def text_field(body: Mapping[str, Any], name: str = "text") -> str:
    """A string (blank or too long is the engine's to say: ``decoding.nonblank``, ``plan``)."""
    if name not in body or body[name] is None:
        raise BadRequest(f"'{name}' is required", code=ErrorCode.MISSING_TEXT, param=name)
    value = body[name]
    if not isinstance(value, str):
        raise BadRequest(f"'{name}' must be a string", code=ErrorCode.INVALID_FIELD, param=name)
    return value


def optional_str(body: Mapping[str, Any], name: str, default: str | None = None) -> str | None:
    value = body.get(name, default)
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"'{name}' must be a string", code=ErrorCode.INVALID_FIELD, param=name)
    return value


def optional_int(body: Mapping[str, Any], name: str) -> int | None:
    """An integer or None (whether it is in range is the engine's to say: ``DecodeOptions``)."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():  # 64.0 is the integer 64 in JSON Schema too
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"'{name}' must be an integer >= 1", code=ErrorCode.INVALID_OPTION, param=name)
    return value


def key_field(fields: Mapping[str, Any], name: str) -> str | None:
    """An API key sent as a field (LibreTranslate's ``api_key``, DeepL's ``auth_key``): absent or a
    string — even null is refused, so a client's mistake is not mistaken for "no key"."""
    if name not in fields:
        return None
    value = fields[name]
    if not isinstance(value, str):
        raise BadRequest(f"'{name}' must be a string", code=ErrorCode.INVALID_FIELD, param=name)
    return value


def presented_key(request: Request, body_key: object = None) -> str | None:
    """The API key a client sent: Bearer, DeepL-Auth-Key, X-API-Key, or an api_key field/parameter."""
    auth = request.headers.get("authorization", "")
    scheme, _, credential = auth.partition(" ")
    if scheme.lower() in ("bearer", "deepl-auth-key") and credential.strip():
        return credential.strip()
    query_key = query_fields(request).get("api_key")
    for candidate in (request.headers.get("x-api-key"), body_key, query_key):
        if isinstance(candidate, str) and candidate:
            return candidate
    return None


def check_api_key(request: Request, settings: Settings, body_key: str | None = None) -> None:
    """401 unless auth is off or the key is one of the configured ones (constant-time compare)."""
    if not settings.auth_required:
        return
    key = presented_key(request, body_key)
    if key is None:
        raise Unauthorized(
            "an API key is required (Authorization: Bearer <key>)", code=ErrorCode.MISSING_API_KEY
        )
    given = key.encode("utf-8", "surrogatepass")
    if not any(hmac.compare_digest(given, allowed.encode()) for allowed in settings.api_keys):
        raise Unauthorized("the API key is not valid", code=ErrorCode.INVALID_API_KEY)


# How the OpenAPI document names the places ``presented_key`` reads a key from.
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


def security(settings: Settings) -> list[dict[str, list[str]]]:
    """Any scheme works on any secured endpoint; with no keys configured, none is needed (``{}``)."""
    anonymous: list[dict[str, list[str]]] = [] if settings.auth_required else [{}]
    schemes: list[dict[str, list[str]]] = [{name: []} for name in SCHEMES]
    return schemes + anonymous
