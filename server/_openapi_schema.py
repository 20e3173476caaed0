"""The vocabulary of the OpenAPI document (``_openapi.py``): small helpers for what the wire
models cannot say themselves — media types, bodies sent as JSON or form fields, SSE events,
operations — and the served languages."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from ._error_codes import FLAVOURS
from ._wire_errors import error_refs
from ._wire_schema import prose

Schema = dict[str, Any]
JSON = "application/json"
SSE = "text/event-stream"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
Values = Callable[[str, str], list[Any]]  # (language, field) -> the field's values that select it


def served_languages(
    schema: Schema, directions: Collection[tuple[str, str]], fields: tuple[str, str], values: Values
) -> None:
    """Restricts a request's language ``fields`` (source, target) to the served ``directions``:
    ``values(language, field)`` are the values of a field that select a language. With several
    directions, the pair must name one of them (``zh`` to ``zh`` is refused): ``anyOf`` a branch per
    direction."""
    pairs = sorted(directions)
    for i, field in enumerate(fields):
        served = (value for pair in pairs for value in values(pair[i], field))
        schema["properties"][field]["enum"] = list(dict.fromkeys(served))
    if len(pairs) > 1:
        branches = [{f: {"enum": values(pair[i], f)} for i, f in enumerate(fields)} for pair in pairs]
        schema["anyOf"] = [{"properties": branch} for branch in branches]


def query_object(name: str, *, required: bool = False, **extra: Any) -> Schema:
    """The fields of request model ``name`` as query parameters (``?a=1&b=2``): one object, exploded."""
    schema = {"$ref": f"#/components/schemas/{name}"}
    return {
        "name": name,
        "in": "query",
        "style": "form",
        "explode": True,
        "required": required,
        "schema": schema,
        **extra,
    }


def header_refs(names: Iterable[str]) -> Schema:
    return {name: {"$ref": f"#/components/headers/{name}"} for name in names}


def array(items: Schema, description: str) -> Schema:
    return {"type": "array", "items": items, "description": description}


def json_content(schema: Schema, **examples: Any) -> Schema:
    content: Schema = {"schema": schema}
    if examples:
        content["examples"] = {name: {"value": value} for name, value in examples.items()}
    return {JSON: content}


def json_body(schema: Schema, **examples: Any) -> Schema:
    return {"required": True, "content": json_content(schema, **examples)}


def json_response(description: str, schema: Schema, headers: Iterable[str] = (), **examples: Any) -> Schema:
    response: Schema = {"description": description, "content": json_content(schema, **examples)}
    if headers:
        response["headers"] = header_refs(headers)
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


def operation(tag: str, op_id: str, ok: Schema, errors: Iterable[int] = (), **extra: Any) -> Schema:
    """An operation whose 200 is ``ok`` and whose ``errors`` are liuyi's statuses it can fail with, in
    its tag's error shape (a compatibility API's tag is its flavour). Summary and description come
    from the route's handler (:func:`described`); ``preface``, ``appendix`` and ``summary`` in
    ``extra`` add to or replace them."""
    responses = {
        "200": ok,
        **extra.pop("responses", {}),
        **error_refs(tag if tag in FLAVOURS else "native", errors),
    }
    return {"tags": [tag], "operationId": op_id, **extra, "responses": responses}


def described(op: Schema, handler: Callable[..., Any]) -> Schema:
    """``op`` with its summary and description: its handler's docstring (first line, rest)."""
    summary, _, description = prose(handler.__doc__ or "").partition("\n\n")
    op = dict(op)
    summary, preface, appendix = op.pop("summary", summary), op.pop("preface", ""), op.pop("appendix", "")
    return {"summary": summary, "description": preface + description + appendix, **op}
