"""server/_decode.py: request bytes become values strictly, or a 400 with a stable code."""

from __future__ import annotations

import json

import pytest

from server._decode import (
    MAX_JSON_DEPTH,
    decode_json,
    decode_multipart,
    decode_query,
    decode_urlencoded,
)
from server._errors import BadRequest


def code_of(call: object) -> str:
    assert callable(call)
    with pytest.raises(BadRequest) as caught:
        call()
    return caught.value.code


def nested(depth: int) -> bytes:
    return b'{"text": "hi", "x": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def test_nesting_up_to_the_limit_parses_and_one_more_level_is_refused() -> None:
    assert decode_json(nested(MAX_JSON_DEPTH))["text"] == "hi"
    assert code_of(lambda: decode_json(nested(MAX_JSON_DEPTH + 1))) == "invalid_json"


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = '[{"\\"' * 500  # brackets and escaped quotes inside one string
    assert decode_json(json.dumps({"text": text}).encode()) == {"text": text}


def test_chinese_text_and_escaped_non_bmp_characters_are_fine() -> None:
    body = json.dumps({"text": "我很好。😀", "pair": "\U0001f600"}).encode()  # ensure_ascii: surrogate pairs
    assert decode_json(body) == {"text": "我很好。😀", "pair": "😀"}


@pytest.mark.parametrize(
    "body",
    [b'"\\ud800"', b'"\\udfff\\ud800"', b'["ok", {"k": "\\ud83d"}]', b'"\xed\xa0\x80"', b'"\xff"', b'"\xc3'],
    ids=["high", "reversed pair", "nested", "raw surrogate bytes", "invalid byte", "truncated"],
)
def test_text_that_is_not_unicode_is_refused(body: bytes) -> None:
    assert code_of(lambda: decode_json(body)) == "invalid_unicode"


def test_form_and_query_percent_escapes_are_decoded_strictly() -> None:
    assert decode_urlencoded(b"q=%E4%BD%A0%E5%A5%BD&target=en&x=a+b") == [
        ("q", "你好"),
        ("target", "en"),
        ("x", "a b"),
    ]
    assert decode_query("text=你好".encode()) == [("text", "你好")]  # raw UTF-8 in a query is fine
    for raw in (b"q=%FF", b"q=%ED%A0%80", b"q=%E4%BD", b"q=\xff"):
        assert code_of(lambda raw=raw: decode_urlencoded(raw)) == "invalid_unicode", raw
        assert code_of(lambda raw=raw: decode_query(raw)) == "invalid_unicode", raw


def multipart(*parts: bytes) -> bytes:
    return b"".join(b"--XyZ\r\n" + part + b"\r\n" for part in parts) + b"--XyZ--\r\n"


def field(name: str, value: bytes, extra: str = "") -> bytes:
    return f'Content-Disposition: form-data; name="{name}"{extra}\r\n\r\n'.encode() + value


CONTENT_TYPE = "multipart/form-data; boundary=XyZ"


def test_multipart_text_fields_are_read_and_file_parts_skipped() -> None:
    body = multipart(
        field("q", "你好".encode()), field("file", b"\x00\xff", '; filename="a.bin"'), field("q", b"x")
    )
    assert decode_multipart(body, CONTENT_TYPE) == [("q", "你好"), ("q", "x")]


def test_multipart_values_that_are_not_utf8_are_refused() -> None:
    body = multipart(field("q", b"\xed\xa0\x80"))
    assert code_of(lambda: decode_multipart(body, CONTENT_TYPE)) == "invalid_unicode"


def test_multipart_without_boundary_or_malformed_is_invalid_form() -> None:
    assert code_of(lambda: decode_multipart(b"whatever", "multipart/form-data")) == "invalid_form"
    assert code_of(lambda: decode_multipart(b"--XyZ\r\ngarbage", CONTENT_TYPE)) == "invalid_form"
