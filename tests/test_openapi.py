"""The OpenAPI document at /openapi.json, as served by the real app: valid OpenAPI 3.1, complete
(every route, every error code a client can see), and truthful (its examples are accepted by the
endpoints they document, and what the endpoints send validates against its schemas)."""

from __future__ import annotations

import ast
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator
from starlette.applications import Starlette
from starlette.routing import Route

from decoding import CLIENT_SPELLINGS, Bundle, DecodingError, normalize_language
from server import Settings, create_app
from server._error_codes import ErrorCode
from server._errors import to_api_error

SERVER_DIR = Path(__file__).resolve().parent.parent / "server"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
Document = dict[str, Any]


@pytest.fixture
async def served(default_bundle: Bundle) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    app = create_app(Settings(), bundles=[default_bundle])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://liuyi") as client:
            yield app, client


@pytest.fixture
def client(served: tuple[Starlette, httpx.AsyncClient]) -> httpx.AsyncClient:
    return served[1]


@pytest.fixture
async def document(client: httpx.AsyncClient) -> Document:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body: Document = response.json()
    return body


def schema_validator(document: Document, schema: dict[str, Any]) -> Draft202012Validator:
    """A JSON Schema 2020-12 validator for ``schema``, its ``#/components/...`` refs resolved in the
    document (OpenAPI 3.1 schemas are JSON Schema 2020-12; ``discriminator`` is an annotation)."""
    return Draft202012Validator({**schema, "components": document["components"]})


def component(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def operations(document: Document) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield path, method, op


def resolve(document: Document, item: dict[str, Any]) -> dict[str, Any]:
    """Follow a ``$ref`` to a reusable component (responses, parameters)."""
    while "$ref" in item:
        node: Any = document
        for part in item["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        item = node
    return item


def media_examples(document: Document) -> Iterator[tuple[str, str, dict[str, Any], Any]]:
    """(where, media type, schema, example value) for every example of a body in the document."""
    bodies = []
    for path, method, op in operations(document):
        if "requestBody" in op:
            bodies.append((f"{method.upper()} {path} request", op["requestBody"]))
        for status, response in op["responses"].items():
            bodies.append((f"{method.upper()} {path} {status}", resolve(document, response)))
    for where, body in bodies:
        for media, content in body.get("content", {}).items():
            if "example" in content:
                yield where, media, content["schema"], content["example"]
            for example in content.get("examples", {}).values():
                yield where, media, content["schema"], example["value"]


def sse_data(text: str) -> list[str]:
    return [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]


async def test_the_document_is_valid_openapi_3_1(document: Document) -> None:
    assert document["openapi"].startswith("3.1.")
    OpenAPIV31SpecValidator(document).validate()


async def test_every_route_the_app_serves_is_documented_with_its_methods(
    served: tuple[Starlette, httpx.AsyncClient], document: Document
) -> None:
    app, _ = served
    routes = {
        (route.path, method)
        for route in app.routes
        if isinstance(route, Route) and route.path != "/"  # "/" is the web page; /static is a Mount
        for method in route.methods or ()
        if method != "HEAD"
    }
    documented = {(path, method.upper()) for path, method, _ in operations(document)}
    assert routes == documented
    assert ("/v1/translate/stream", "GET") in routes and ("/openapi.json", "GET") in routes


def codes_written_in(path: Path) -> set[str]:
    """``ErrorCode.X`` members a module names: the codes it raises (string literals are not codes:
    mypy refuses them where an ``ErrorCode`` is expected)."""
    return {
        ErrorCode[node.attr].value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "ErrorCode"
    }


def engine_errors() -> Iterator[DecodingError]:
    """One instance of every engine error class (built without their constructors' arguments)."""
    pending = [DecodingError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        error = cls.__new__(cls)
        DecodingError.__init__(error, "message")
        error.limit = error.length = 1  # what the mapping reads from InputTooLongError
        yield error


async def test_every_error_code_a_client_can_see_is_documented(document: Document) -> None:
    server_codes = set().union(
        *(codes_written_in(p) for p in SERVER_DIR.glob("*.py") if "openapi" not in p.name)
    )
    # engine errors reach clients through the one mapping, which may rename them (engine_overloaded)
    engine_codes = {to_api_error(error).code for error in engine_errors()}
    assert {"invalid_json", "shutting_down", "http_error"} <= server_codes
    assert {"text_too_long", "overloaded", "bundle_checksum_mismatch"} <= engine_codes
    assert "engine_overloaded" not in engine_codes  # becomes "overloaded": clients never see it
    documented = {choice["const"] for choice in document["components"]["schemas"]["ErrorCode"]["oneOf"]}
    assert documented == {code.value for code in ErrorCode}  # the schema is the table
    assert (server_codes | engine_codes) - documented == set()
    assert all(choice["description"] for choice in document["components"]["schemas"]["ErrorCode"]["oneOf"])


async def test_the_documented_translate_examples_are_accepted_and_answered_as_documented(
    client: httpx.AsyncClient, document: Document
) -> None:
    op = document["paths"]["/v1/translate"]["post"]
    examples = op["requestBody"]["content"]["application/json"]["examples"]
    assert examples["simple"]["value"] == {"text": "我很好。"}
    response_schema = document["components"]["schemas"]["TranslateResponse"]
    for example in examples.values():
        response = await client.post("/v1/translate", json=example["value"])
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(response_schema["required"]) <= set(body)
        schema_validator(document, component("TranslateResponse")).validate(body)
        for header in op["responses"]["200"]["headers"]:
            assert header.lower() in response.headers
    simple = await client.post("/v1/translate", json=examples["simple"]["value"])
    assert simple.json()["translation"] == "I'm very well."  # what the documented response example says


async def test_every_documented_request_example_is_accepted(
    client: httpx.AsyncClient, document: Document
) -> None:
    tried = 0
    for path, method, op in operations(document):
        content = op.get("requestBody", {}).get("content", {}).get("application/json", {})
        ok = resolve(document, op["responses"]["200"])["content"]
        for name, example in content.get("examples", {}).items():
            response = await client.request(method, path, json=example["value"])
            assert response.status_code == 200, f"{method.upper()} {path} example {name!r}: {response.text}"
            if response.headers["content-type"].startswith("application/json"):
                schema_validator(document, ok["application/json"]["schema"]).validate(response.json())
            tried += 1
    assert tried >= 3


async def test_every_example_in_the_document_matches_its_schema(document: Document) -> None:
    seen = 0
    for where, media, schema, example in media_examples(document):
        if media == "application/x-ndjson":
            values = [json.loads(line) for line in example.splitlines()]
        elif media == "text/event-stream":  # the data lines hold the JSON the schema's description names
            data = [line for line in sse_data(example) if line != "[DONE]"]
            schema = component("ChatCompletionChunk" if "chat" in where else "StreamEvent")
            values = [json.loads(line) for line in data]
        elif media == "application/json":
            values = [example]
        else:
            continue
        for value in values:
            errors = [e.message for e in schema_validator(document, schema).iter_errors(value)]
            assert not errors, f"{where} ({media}): {errors}"
            seen += 1
    assert seen > 50


async def test_streamed_events_validate_against_the_event_schemas(
    client: httpx.AsyncClient, document: Document
) -> None:
    event = schema_validator(document, component("StreamEvent"))
    ndjson = await client.post("/v1/translate/stream", json={"text": "我很好。你喜欢吃苹果吗？"})
    lines = [json.loads(line) for line in ndjson.text.splitlines()]
    sse = await client.get("/v1/translate/stream", params={"text": "我很好。"})
    frames = [json.loads(data) for data in sse_data(sse.text)]
    assert lines[0]["type"] == "start" and lines[-1]["type"] == "done"
    assert frames[-1]["type"] == "done"
    for value in [*lines, *frames]:
        event.validate(value)


@pytest.mark.parametrize("path", ["/v1/models", "/healthz", "/readyz"])
async def test_open_endpoints_answer_as_documented(
    client: httpx.AsyncClient, document: Document, path: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 200
    op = document["paths"][path]["get"]
    assert op["security"] == []
    schema_validator(document, op["responses"]["200"]["content"]["application/json"]["schema"]).validate(
        response.json()
    )


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"text": "   "}, 400, "empty_text"),
        ({"text": "我很好。", "max_new_tokens": 0}, 400, "invalid_option"),
        ({"text": "我很好。", "source": "fr"}, 400, "unsupported_language"),
        ({"text": "我" * 6000}, 413, "text_too_long"),
    ],
)
async def test_error_bodies_match_the_documented_error_response(
    client: httpx.AsyncClient, document: Document, body: dict[str, Any], status: int, code: str
) -> None:
    response = await client.post("/v1/translate", json=body)
    assert response.status_code == status
    documented = resolve(document, document["paths"]["/v1/translate"]["post"]["responses"][str(status)])
    assert code in documented["content"]["application/json"]["examples"]
    schema_validator(document, component("ErrorResponse")).validate(response.json())
    assert response.json()["error"]["code"] == code


def test_every_documented_language_alias_is_accepted() -> None:
    for language, aliases in CLIENT_SPELLINGS.items():
        for alias in aliases:
            assert normalize_language(alias) == language
            assert normalize_language(alias.upper().replace("-", "_")) == language


async def test_security_follows_the_configured_api_keys(document: Document, default_bundle: Bundle) -> None:
    assert {} in document["security"]  # no keys configured: anonymous access is documented
    assert set(document["components"]["securitySchemes"]) == {
        "bearerAuth",
        "apiKeyHeader",
        "apiKeyQuery",
        "deeplAuthKey",
    }
    app = create_app(Settings(api_keys=("secret",)), bundles=[default_bundle])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://liuyi") as client:
            keyed = (await client.get("/openapi.json")).json()
            anonymous = await client.post("/v1/translate", json={"text": "我很好。"})
            bearer = await client.post(
                "/v1/translate", json={"text": "我很好。"}, headers={"Authorization": "Bearer secret"}
            )
            header = await client.post(
                "/v1/translate", json={"text": "我很好。"}, headers={"X-API-Key": "secret"}
            )
    assert {} not in keyed["security"]
    assert anonymous.status_code == 401 and bearer.status_code == 200 and header.status_code == 200
    assert keyed["paths"]["/healthz"]["get"]["security"] == []


def test_the_readme_error_table_is_the_generated_one() -> None:
    """One table of codes: the README's copy is what `python -m server._error_codes` prints."""
    from server._error_codes import markdown_table

    readme = (SERVER_DIR.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- error-codes: generated")
    block = readme[readme.index("\n", start) + 1 : readme.index("<!-- /error-codes -->")]
    assert block == markdown_table() + "\n"
