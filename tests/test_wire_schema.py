"""The wire models' JSON Schemas: what the OpenAPI document's component schemas are made of."""

from __future__ import annotations

import re
from typing import Annotated, Literal, NotRequired, TypedDict, Union

from jsonschema import Draft202012Validator

from server._wire import NATIVE_MODELS, StreamEvent
from server._wire_schema import NOT_BLANK, Doc, Named, SchemaSet


class Ping(TypedDict):
    """A heartbeat."""

    type: Literal["ping"]


class Note(TypedDict):
    """A note, with prose
    wrapped over two lines."""

    type: Literal["note"]
    text: Annotated[str, Doc("What it says.", minLength=1)]
    mood: NotRequired[Annotated[Literal["calm", "loud"] | None, Named("Mood", "How it is said.")]]
    tags: NotRequired[list[str]]


Message = Annotated[Union[Ping, Note], Named("Message", "One message.")]  # noqa: UP007


def test_a_typeddict_becomes_an_object_whose_not_required_keys_are_optional() -> None:
    schemas = SchemaSet().add(Note).components
    assert schemas["Note"] == {
        "type": "object",
        "description": "A note, with prose wrapped over two lines.",
        "properties": {
            "type": {"const": "note"},
            "text": {"type": "string", "description": "What it says.", "minLength": 1},
            "mood": {"$ref": "#/components/schemas/Mood"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["type", "text"],
    }
    assert schemas["Mood"] == {
        "description": "How it is said.",
        "type": ["string", "null"],
        "enum": ["calm", "loud", None],
    }


def test_a_union_of_typed_events_is_a_discriminated_one_of() -> None:
    schemas = SchemaSet().add(Message).components
    assert schemas["Message"]["oneOf"] == [
        {"$ref": "#/components/schemas/Ping"},
        {"$ref": "#/components/schemas/Note"},
    ]
    assert schemas["Message"]["discriminator"] == {
        "propertyName": "type",
        "mapping": {"ping": "#/components/schemas/Ping", "note": "#/components/schemas/Note"},
    }


def test_what_the_builders_make_validates_against_the_generated_stream_event_schema() -> None:
    from server import _wire_examples as examples

    components = SchemaSet({"ErrorCode": {"type": "string"}}).add(*NATIVE_MODELS, StreamEvent).components
    validator = Draft202012Validator(
        {"$ref": "#/components/schemas/StreamEvent", "components": {"schemas": components}}
    )
    events = examples.events("cn2en")
    assert [e["type"] for e in events] == ["start", "delta", "delta", "delta", "delta", "segment", "done"]
    for event in events:
        assert list(validator.iter_errors(event)) == []
    assert list(validator.iter_errors({"type": "delta", "text": "x"}))  # index and segment missing


def test_the_not_blank_pattern_accepts_exactly_what_the_engine_calls_not_blank() -> None:
    """JSON Schema's `\\S` would call U+001E visible; Python (and so the server) calls it a space."""
    pattern = re.compile(NOT_BLANK)
    disagree = [c for c in range(0x110000) if bool(pattern.search(chr(c))) != (not chr(c).isspace())]
    assert disagree == []
