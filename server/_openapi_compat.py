"""The compatibility APIs in the OpenAPI document: OpenAI chat completions, LibreTranslate, DeepL.

Documented briefly: the request fields liuyi reads, the response fields it sends, and where it
differs from the original service. Other fields of the original APIs are accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from . import _deepl as deepl
from . import _libretranslate as libre
from . import _openai
from . import _wire_examples as examples
from ._deepl import TARGETS as DEEPL_TARGETS
from ._openai import AUTO_MODELS
from ._openapi_schema import (
    SSE,
    Schema,
    array,
    fields_body,
    form_fields,
    json_content,
    json_response,
    json_text,
    language_names,
    operation,
    ref,
    sse_event,
)
from ._wire_compat import COMPAT_MODELS, NOT_BLANK
from ._wire_errors import error_refs
from ._wire_schema import SchemaSet

VISIBLE = {"properties": {"text": {"pattern": NOT_BLANK}}}  # a text part with a visible character
TRANSLATING = (400, 401, 413, 415, 500, 503, 504)  # what a translating endpoint can fail with
READING = (400, 401, 413, 415)  # endpoints that read a body but translate nothing
OPEN: list[Schema] = []  # no key needed


def compat_schemas(
    models: Sequence[tuple[str, str]], sources: Collection[str], targets: Collection[str]
) -> dict[str, Schema]:
    """Generated from the wire models, plus this app's facts: ``models`` (bundle name, direction),
    the languages they translate from (``sources``) and into (``targets``)."""
    schemas = SchemaSet({"ErrorCode": {}}).add(*COMPAT_MODELS).components
    del schemas["ErrorCode"]  # the native schemas have it
    chat = schemas["ChatCompletionRequest"]["properties"]
    chat["model"]["examples"] = [*(f"liuyi-{d}" for _, d in models), *(n for n, _ in models), *AUTO_MODELS]
    user_turn = {"type": "object", "properties": {"role": {"const": "user"}}, "required": ["role"]}
    chat["messages"]["contains"] = user_turn
    visible = {"anyOf": [{"type": "string", "pattern": NOT_BLANK}, {"type": "array", "contains": VISIBLE}]}
    # the user's text must have a visible character (400 `empty_text`)
    schemas["ChatMessage"].update(
        {"if": user_turn, "then": {"required": ["content"], "properties": {"content": visible}}}
    )
    libre = schemas["LibreTranslateRequest"]["properties"]
    libre["source"].update(default="auto", enum=["auto", *language_names(sources), "", None])
    libre["target"]["enum"] = language_names(targets)
    deepl = schemas["DeepLTranslateRequest"]["properties"]
    deepl["target_lang"]["enum"] = [code for code, lang in DEEPL_TARGETS.items() if lang in targets]
    deepl["source_lang"]["enum"] = [*(lang.upper() for lang in sorted(sources)), "", None]
    for form, body in (
        ("LibreTranslateForm", "LibreTranslateRequest"),
        ("DeepLTranslateForm", "DeepLTranslateRequest"),
    ):
        schemas[form] = form_fields(schemas[body])
    return schemas


def compat_paths(model: str) -> dict[str, Schema]:
    text, translation = examples.TEXT, examples.TRANSLATION
    chat = {"model": "liuyi-zh-en", "messages": [{"role": "user", "content": text}]}
    detected = {"confidence": 100.0, "language": "zh"}
    chat_data = {
        "anyOf": [
            {"const": "[DONE]"},
            json_text({"anyOf": [ref("ChatCompletionChunk"), ref("OpenAIErrorResponse")]}),
        ]
    }
    chat_sse = sse_event(
        "`data: <ChatCompletionChunk>` events, then `data: [DONE]` (or one `data: <OpenAIErrorResponse>` "
        "after a failure).",
        chat_data,
    )
    chat_ok = {
        "description": "The completion (JSON), or its chunks (SSE) when `stream` is true.",
        "headers": {"X-Request-ID": {"$ref": "#/components/headers/X-Request-ID"}},
        "content": {
            **json_content(ref("ChatCompletion"), completion=examples.chat_completion(model)),
            SSE: {"schema": chat_sse, "example": examples.chat_stream(model)},
        },
    }
    libre_ok = json_response(
        "The translation(s).",
        ref("LibreTranslateResponse"),
        one={"translatedText": translation},
        auto={"translatedText": [translation], "detectedLanguage": [detected]},
    )
    libre_body = fields_body(
        ref("LibreTranslateRequest"),
        ref("LibreTranslateForm"),
        one={"q": text, "source": "zh", "target": "en"},
        auto={"q": [text], "source": "auto", "target": "en"},
        html={"q": f"<p>{text}</p>", "target": "en", "format": "html"},
    )
    deepl_reply = {
        "translations": [{"detected_source_language": "ZH", "text": translation, "billed_characters": 4}]
    }
    deepl_body = fields_body(
        ref("DeepLTranslateRequest"), ref("DeepLTranslateForm"), en={"text": [text], "target_lang": "EN-US"}
    )
    return {
        "/v1/chat/completions": {
            "post": operation(
                "openai",
                "chatCompletions",
                _openai.chat_completions,
                {"200": chat_ok, **error_refs("openai", (*TRANSLATING, 404))},
                requestBody={
                    "required": True,
                    "content": json_content(
                        ref("ChatCompletionRequest"), chat=chat, stream={**chat, "stream": True}
                    ),
                },
            )
        },
        "/translate": {
            "post": operation(
                "libretranslate",
                "libreTranslate",
                libre.translate,
                {"200": libre_ok, **error_refs("libretranslate", TRANSLATING)},
                requestBody=libre_body,
            )
        },
        "/detect": {
            "post": operation(
                "libretranslate",
                "libreDetect",
                libre.detect,
                {
                    "200": json_response("One guess.", array(ref("Detection"), "The guess."), zh=[detected]),
                    **error_refs("libretranslate", READING),
                },
                requestBody=fields_body(ref("DetectRequest"), zh={"q": text}),
            )
        },
        "/languages": {
            "get": operation(
                "libretranslate",
                "libreLanguages",
                libre.languages,
                {"200": json_response("The languages.", array(ref("LibreTranslateLanguage"), "Languages."))},
                security=OPEN,
            )
        },
        "/frontend/settings": {
            "get": operation(
                "libretranslate",
                "libreFrontendSettings",
                libre.frontend_settings,
                {"200": json_response("The settings.", ref("FrontendSettings"))},
                security=OPEN,
            )
        },
        "/v2/translate": {
            "post": operation(
                "deepl",
                "deeplTranslate",
                deepl.translate,
                {
                    "200": json_response("The translations.", ref("DeepLTranslateResponse"), en=deepl_reply),
                    **error_refs("deepl", TRANSLATING),
                },
                requestBody=deepl_body,
            )
        },
        "/v2/languages": deepl_reads(
            "deeplLanguages", deepl.languages, array(ref("DeepLLanguage"), "Languages."), kind=True
        ),
        "/v2/usage": deepl_reads("deeplUsage", deepl.usage, ref("DeepLUsage")),
    }


def deepl_reads(op_id: str, handler: Callable[..., Any], schema: Schema, *, kind: bool = False) -> Schema:
    """/v2/languages and /v2/usage: GET or POST, parameters in the query or in a body."""
    names: dict[str, Schema] = {"auth_key": {"type": "string", "description": "Legacy way to send the key."}}
    if kind:
        names["type"] = {"type": "string", "enum": ["source", "target"], "default": "source"}
    parameters = [{"name": name, "in": "query", "schema": value} for name, value in names.items()]
    fields = {"type": "object", "properties": names}
    responses = {"200": json_response("The answer.", schema), **error_refs("deepl", READING)}
    body = {"required": False, "content": fields_body(fields)["content"]}
    return {
        "get": operation("deepl", op_id, handler, responses, parameters=parameters),
        "post": operation(
            "deepl", f"{op_id}Post", handler, responses, parameters=parameters, requestBody=body
        ),
    }
