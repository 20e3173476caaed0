"""Our own fuzzing: whatever a client sends to any route, the answer is never a 5xx, errors are JSON
with a stable code, and the server keeps translating afterwards.

Two generators, both against a real uvicorn on 127.0.0.1 (bounded in examples):
* hypothesis: bodies and query strings built from every route's field names, any JSON value, lone
  surrogates, raw bytes, form and multipart encodings, and garbage;
* schemathesis: requests generated from the served ``/openapi.json``, with every check: the
  document describes exactly what the server accepts and answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote_from_bytes

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoding import Bundle, load_bundle
from decoding.export import convert_checkpoint
from server import Settings
from tests._live import LiveServer

ROUTES = [
    ("POST", "/v1/translate"),
    ("POST", "/v1/translate/stream"),
    ("GET", "/v1/translate/stream"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/translate"),
    ("POST", "/detect"),
    ("POST", "/v2/translate"),
    ("GET", "/v2/languages"),
    ("POST", "/v2/languages"),
    ("POST", "/v2/usage"),
    ("GET", "/v1/models"),
]
FIELDS = [
    "text", "source", "target", "max_new_tokens", "q", "format", "api_key", "alternatives", "target_lang",
    "source_lang", "tag_handling", "glossary_id", "auth_key", "type", "model", "messages", "stream",
    "stream_options", "n", "max_tokens", "max_completion_tokens", "role", "content",
]  # fmt: skip
# Text with everything hostile: lone surrogates, controls, Chinese, emoji, markup.
hostile_text = st.text(
    alphabet=st.one_of(
        st.characters(codec=None, categories=["Cs"]),  # lone surrogates: valid JSON, not text
        st.characters(codec=None, categories=["Cc", "Lo", "So", "Ll", "Zs", "Po"]),
        st.sampled_from(list("<>&\"'/\\")),
    ),
    max_size=24,
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    hostile_text,
    st.sampled_from(["zh", "en", "auto", "EN-US", "html", "liuyi-auto", "user", "我很好。", "target"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(FIELDS), hostile_text), inner, max_size=5),
    ),
    max_leaves=12,
)
bodies = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6)


# A valid request per route: mutating one field of it reaches the code behind validation, where
# purely random bodies rarely get.
VALID: dict[str, dict[str, Any]] = {
    "/v1/translate": {"text": "$TEXT"},
    "/v1/translate/stream": {"text": "$TEXT"},
    "/v1/chat/completions": {"model": "liuyi-auto", "messages": [{"role": "user", "content": "$TEXT"}]},
    "/translate": {"q": "$TEXT", "source": "auto", "target": "en", "format": "html"},
    "/detect": {"q": "$TEXT"},
    "/v2/translate": {"text": ["$TEXT"], "target_lang": "EN-US", "tag_handling": "xml"},
    "/v2/languages": {"type": "target"},
    "/v2/usage": {},
    "/v1/models": {},
}


@st.composite
def mutated(draw: st.DrawFn, path: str) -> dict[str, Any]:
    text = draw(st.sampled_from(["我很好。", "Hello there.", "<b>我很好</b>", "2024"]))
    fields = json.loads(json.dumps(VALID[path]).replace("$TEXT", text))  # English: echoed, not translated
    for _ in range(draw(st.integers(1, 2))):
        messages = fields.get("messages")
        editable = isinstance(messages, list) and messages and isinstance(messages[0], dict)
        if path == "/v1/chat/completions" and editable and draw(st.booleans()):
            fields["messages"][0][draw(st.sampled_from(["role", "content", "name"]))] = draw(json_values)
        elif fields and draw(st.booleans()):  # hostile text inside an otherwise valid string field
            key = draw(st.sampled_from(sorted(fields)))
            if isinstance(fields[key], str):
                fields[key] = draw(hostile_text) + fields[key]
            elif isinstance(fields[key], list) and fields[key] and isinstance(fields[key][0], str):
                fields[key][0] = draw(hostile_text) + fields[key][0]
        else:
            fields[draw(st.sampled_from([*fields, *FIELDS]))] = draw(json_values)
    return fields


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], bytes]:
    method, path = draw(st.sampled_from(ROUTES))
    fields = draw(st.one_of(mutated(path), mutated(path), bodies))
    query = "&".join(
        f"{quote_from_bytes(k.encode())}={quote_from_bytes(draw(st.binary(max_size=8)))}"
        for k in list(fields)[:3]
    )
    encoding = draw(st.sampled_from(["json", "json", "json", "form", "multipart", "bytes", "none"]))
    headers: dict[str, str] = {}
    content = b""
    if encoding == "json":
        headers["content-type"] = "application/json"
        content = json.dumps(fields).encode()  # ensure_ascii: lone surrogates become \ud800 escapes
    elif encoding == "form":
        headers["content-type"] = "application/x-www-form-urlencoded"
        content = "&".join(f"{k}={quote_from_bytes(draw(st.binary(max_size=12)))}" for k in fields).encode()
    elif encoding == "multipart":
        headers["content-type"] = "multipart/form-data; boundary=fuzz"
        parts = [
            f'--fuzz\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n'.encode()
            + draw(st.binary(max_size=12))
            for k in fields
        ]
        content = b"\r\n".join([*parts, b"--fuzz--\r\n"]) if draw(st.booleans()) else b"\r\n".join(parts)
    elif encoding == "bytes":
        headers["content-type"] = draw(
            st.sampled_from(["application/json", "text/plain", "multipart/form-data"])
        )
        content = draw(st.binary(max_size=64))
    return method, f"{path}?{query}" if query else path, headers, content


@pytest.fixture(scope="module")
def server(default_bundle: Bundle) -> Iterator[LiveServer]:
    with LiveServer(Settings(), bundles=[default_bundle]) as live:
        yield live


@pytest.fixture(scope="module")
def two_directions(
    default_bundle: Bundle, tiny_nllb_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """zh->en (the bundled model) and en->zh (a tiny NLLB made to serve that direction only)."""
    out = tmp_path_factory.mktemp("bundles") / "en-zh"
    en_zh = load_bundle(convert_checkpoint(tiny_nllb_dir, out, name="nllb-tiny", source_lang="en"))
    with LiveServer(Settings(), bundles=[default_bundle, en_zh]) as live:
        yield live


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:  # one keep-alive connection
        yield client


def check_answer(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.headers["content-type"] == "application/json"
        body: Any = response.json()
        assert body and "Traceback" not in response.text
    elif response.headers.get("content-type", "").startswith("application/x-ndjson"):
        last = json.loads(response.text.splitlines()[-1])
        assert last["type"] in ("done", "error")


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request_parts=requests())
def test_no_request_to_any_route_gets_a_server_error(
    client: httpx.Client, request_parts: tuple[str, str, dict[str, str], bytes]
) -> None:
    method, target, headers, content = request_parts
    check_answer(client.request(method, target, headers=headers, content=content))


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/translate", {"text": "\ud800 hello"}),
        ("/v1/translate/stream", {"text": "\ud800 hello"}),
        (
            "/v1/chat/completions",
            {"model": "liuyi-auto", "messages": [{"role": "user", "content": "\udfff"}]},
        ),
        ("/translate", {"q": "\ud800 hello", "target": "en"}),  # text in the target language is echoed
        ("/detect", {"q": "\ud800 hello"}),
        ("/v2/translate", {"text": ["\ud800 hello"], "target_lang": "EN"}),
        ("/v2/languages", {"type": "\ud800"}),
    ],
)
def test_every_route_refuses_a_lone_surrogate_with_a_400(
    client: httpx.Client, path: str, body: object
) -> None:
    response = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert "surrogate" in response.text


def test_after_the_fuzzing_the_same_connection_still_translates(client: httpx.Client) -> None:
    response = client.post("/v1/translate", json={"text": "我很好。"})
    assert (response.status_code, response.json()["translation"]) == (200, "I'm very well.")


@pytest.mark.parametrize("served", ["server", "two_directions"])
def test_schemathesis_finds_the_served_openapi_document_true_to_the_server(
    served: str, request: pytest.FixtureRequest
) -> None:
    """Every schemathesis check: no 5xx, responses and SSE events as documented, every schema-valid
    request accepted and every schema-violating one refused (413 counts as a refusal of oversize
    input: see tests/schemathesis.toml, the one documented exception). With two directions, a
    request naming zh to zh is schema-valid per field but not as a pair: the document says so."""
    server: LiveServer = request.getfixturevalue(served)
    schemathesis = Path(sys.executable).with_name("st")
    result = subprocess.run(
        [
            str(schemathesis),
            "--config-file",
            str(Path(__file__).with_name("schemathesis.toml")),
            "run",
            f"{server.url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            "25",
            "--phases",
            "examples,coverage,fuzzing",
            "--workers",
            "1",
            "--request-timeout",
            "30",
            "--seed",
            "20261202",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0, result.stdout[-6000:]
    assert " passed" in result.stdout and "generated" in result.stdout
    assert "failures" not in result.stdout.split("SUMMARY")[-1], result.stdout[-6000:]
