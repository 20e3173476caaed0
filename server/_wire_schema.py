"""JSON Schemas generated from the wire models (``_wire.py``, ``_wire_compat.py``): the OpenAPI
document's component schemas are read off the same TypedDicts the builders are checked against.

A wire model is a ``TypedDict``: at run time a plain dict (so the builders and the bytes on the
wire cost and look exactly as before), to mypy a checked shape, and here a schema. Field prose and
the JSON Schema keywords a type cannot say (``minimum``, ``pattern``) ride along in ``Annotated``:

    class Usage(TypedDict):
        \"\"\"Token counts.\"\"\"
        input_tokens: Annotated[int, Doc("Source tokens.", minimum=0)]

``Named`` makes a type a component of its own (``FinishReason``, ``StreamEvent``); a union of
models with a ``type: Literal[...]`` field becomes a ``oneOf`` with a discriminator.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints

Schema = dict[str, Any]
# A text with a visible character, as ``decoding.nonblank`` judges it (not ``str.isspace``). Not
# ``\S``: JSON Schema's (ECMAScript's) whitespace differs from Python's (U+001C-U+001F, U+0085, U+FEFF).
NOT_BLANK = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


class Doc:
    """What a field means, plus JSON Schema keywords its type cannot say."""

    def __init__(self, text: str = "", **keywords: Any) -> None:
        self.text, self.keywords = text, keywords


class Named:
    """Makes the annotated type a reusable component (``#/components/schemas/<name>``)."""

    def __init__(self, name: str, text: str = "") -> None:
        self.name, self.text = name, text


def prose(docstring: str) -> str:
    """A docstring as Markdown reads it: hard-wrapped lines joined, paragraphs and ``- `` list items
    kept apart."""
    lines: list[str] = []
    for line in inspect.cleandoc(docstring).splitlines():
        line = line.strip()
        if lines and lines[-1] and line and not line.startswith("- "):
            lines[-1] += " " + line
        else:
            lines.append(line)
    return "\n".join(lines)


def ref(name: str, description: str | None = None) -> Schema:
    return {"$ref": f"#/components/schemas/{name}", **({"description": description} if description else {})}


class SchemaSet:
    """Schemas of wire models, collected with every component they refer to."""

    def __init__(self, given: Mapping[str, Schema] | None = None) -> None:
        self.components: dict[str, Schema] = dict(given or {})  # hand-made ones (ErrorCode)

    def add(self, *models: Any) -> SchemaSet:
        for model in models:
            self.of(model)
        return self

    def of(self, hint: Any) -> Schema:
        origin, args = get_origin(hint), get_args(hint)
        if origin is typing.Annotated:
            return self._annotated(args[0], args[1:])
        if origin in (NotRequired, Required):
            return self.of(args[0])
        if typing.is_typeddict(hint):
            return self._model(hint)
        if inspect.isclass(hint) and issubclass(hint, Enum):
            if hint.__name__ not in self.components:
                self.components[hint.__name__] = {"type": "string", "enum": [m.value for m in hint]}
            return ref(hint.__name__)
        if hint in _SCALARS:
            return {"type": _SCALARS[hint]}
        if origin is Literal:
            if len(args) == 1:
                return {"const": args[0]}
            kinds = {_SCALARS[type(arg)] for arg in args}
            return {**({"type": kinds.pop()} if len(kinds) == 1 else {}), "enum": list(args)}
        if origin is list:
            return {"type": "array", "items": self.of(args[0])}
        if origin is dict:
            return {"type": "object", "additionalProperties": self.of(args[1])}
        if origin in (Union, types.UnionType):
            return self._union(args)
        raise TypeError(f"no JSON Schema for {hint!r}")

    def _annotated(self, hint: Any, marks: tuple[Any, ...]) -> Schema:
        schema = self.of(hint)
        for mark in marks:
            if isinstance(mark, Doc):
                schema = {**schema, **({"description": mark.text} if mark.text else {}), **mark.keywords}
            elif isinstance(mark, Named):
                self.components[mark.name] = {**({"description": mark.text} if mark.text else {}), **schema}
                schema = ref(mark.name)
        return schema

    def _model(self, model: Any) -> Schema:
        name = model.__name__
        if name not in self.components:
            self.components[name] = {}  # placeholder: a model may refer to itself
            hints = get_type_hints(model, include_extras=True)
            self.components[name] = {
                "type": "object",
                "description": prose(model.__doc__ or ""),
                "properties": {key: self.of(hint) for key, hint in hints.items()},
                # from the hints: Python 3.11 misses NotRequired in string annotations
                "required": [key for key, hint in hints.items() if get_origin(hint) is not NotRequired],
            }
        return ref(name)

    def _union(self, args: tuple[Any, ...]) -> Schema:
        kinds = [arg for arg in args if arg is not type(None)]
        nullable = len(kinds) < len(args)
        if len(kinds) == 1:
            schema = self.of(kinds[0])
            if not nullable:
                return schema
            if isinstance(schema.get("type"), str):
                enum = schema.get("enum")
                return {
                    **schema,
                    "type": [schema["type"], "null"],
                    **({"enum": [*enum, None]} if enum else {}),
                }
            return {"anyOf": [schema, {"type": "null"}]}
        branches = [self.of(kind) for kind in kinds]
        if all(typing.is_typeddict(kind) and "type" in kind.__annotations__ for kind in kinds):
            mapping = {
                get_args(get_type_hints(kind)["type"])[0]: ref(kind.__name__)["$ref"] for kind in kinds
            }
            return {"oneOf": branches, "discriminator": {"propertyName": "type", "mapping": mapping}}
        return {"anyOf": [*branches, {"type": "null"}] if nullable else branches}


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
