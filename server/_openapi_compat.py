"""The compatibility APIs in the OpenAPI document: OpenAI chat completions, LibreTranslate, DeepL.

Documented briefly: the request fields liuyi reads, the response fields it sends, and where it
differs from the original service. Other fields of the original APIs are accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from ._deepl import TARGETS as DEEPL_TARGETS
from ._events import dumps
from ._openai import AUTO_MODELS
from ._openapi_schema import (
    NOT_BLANK,
    SSE,
    Schema,
    array,
    error_refs,
    fields_body,
    form_fields,
    json_content,
    json_response,
    json_text,
    language_names,
    obj,
    one_text_or_many,
    operation,
    prop,
    ref,
    sse_event,
)

TRANSLATING = (400, 401, 413, 415, 500, 503, 504)  # what a translating endpoint can fail with
READING = (400, 401, 413, 415)  # endpoints that read a body but translate nothing
CREATED = 1767225600  # example timestamp
OPEN: list[Schema] = []  # no key needed
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")
CHAT_DESCRIPTION = """\
For OpenAI clients (`base_url=http://host:8000/v1`). With `stream: true` the answer is server-sent \
events: `data: <ChatCompletionChunk>` lines (the role, one per text delta, one with `finish_reason`, a \
usage chunk with `stream_options.include_usage`), then `data: [DONE]`. An error after the first byte is \
one `data: <OpenAIErrorResponse>` line, and the stream ends *without* `[DONE]`, as OpenAI's API does."""


def compat_schemas(
    models: Sequence[tuple[str, str]], sources: Collection[str], targets: Collection[str]
) -> dict[str, Schema]:
    """``sources``/``targets``: the languages the app's models translate from and into."""
    names = [name for name, _ in models]
    aliases = [f"liuyi-{direction}" for _, direction in models]
    usage = obj(
        "Token counts.",
        {name: prop("integer", f"{name.split('_')[0].title()} tokens.", minimum=0) for name in TOKEN_FIELDS},
    )
    chat_common = {
        "id": prop("string", "`chatcmpl-` and the request id (`X-Request-ID`)."),
        "created": prop("integer", "Unix time."),
        "model": prop("string", "Name of the model bundle that translated."),
        "system_fingerprint": {"type": "null"},
    }
    finish = prop(
        ["string", "null"], "`stop`, or `length` when cut at the token limit.", enum=["stop", "length", None]
    )
    text_part = obj("A text part.", {"type": {"const": "text"}, "text": {"type": "string"}})
    visible_part = {"properties": {"text": {"pattern": NOT_BLANK}}}
    user_turn = {"type": "object", "properties": {"role": {"const": "user"}}, "required": ["role"]}
    deepl_targets = [code for code, lang in DEEPL_TARGETS.items() if lang in targets]
    detection = obj(
        "Detected source language (when `source` is `auto`).",
        {
            "confidence": prop("number", "0 to 100.", minimum=0, maximum=100),
            "language": prop("string", "`zh` or `en`."),
        },
    )
    schemas = {
        # --- OpenAI
        "ChatCompletionRequest": obj(
            "The last `user` message is translated; system prompts, earlier turns, `temperature` and other "
            "OpenAI fields are ignored (decoding is greedy).",
            {
                "model": prop(
                    "string",
                    minLength=1,
                    description="Picks the direction: a bundle name or its alias, or `liuyi`/`liuyi-auto` "
                    "(source detected, target the other language).",
                    examples=[*aliases, *names, *AUTO_MODELS],
                ),
                "messages": array(
                    ref("ChatMessage"),
                    "The conversation, with a `user` message.",
                    minItems=1,
                    contains=user_turn,
                ),
                "stream": prop(
                    ["boolean", "null"], "Stream the answer as server-sent events.", default=False
                ),
                "stream_options": {
                    "type": ["object", "null"],
                    "properties": {"include_usage": {"type": "boolean"}},
                    "description": "`include_usage: true` adds a last chunk with `usage` (others say null).",
                },
                "max_completion_tokens": prop(
                    ["integer", "null"], "`max_new_tokens` per sentence (see /v1/translate).", minimum=1
                ),
                "max_tokens": prop(["integer", "null"], "Older name of `max_completion_tokens`.", minimum=1),
                "n": prop(["integer", "null"], "Only 1.", enum=[1, None]),
            },
            optional=("stream", "stream_options", "max_completion_tokens", "max_tokens", "n"),
        ),
        "ChatMessage": obj(
            "A chat message.",
            {
                "role": prop("string", "`user` messages are translated, others ignored."),
                "content": {
                    "description": 'A string, or a list of `{"type": "text", "text"}` parts (one per line).',
                    "anyOf": [{"type": "string"}, array(text_part, "Text parts (other kinds are refused).")],
                },
            },
            optional=("content",),
            # the user's text must have a visible character (400 `empty_text`)
            **{
                "if": user_turn,
                "then": {
                    "required": ["content"],
                    "properties": {
                        "content": {
                            "anyOf": [
                                {"type": "string", "pattern": NOT_BLANK},
                                {"type": "array", "contains": visible_part},
                            ]
                        }
                    },
                },
            },
        ),
        "ChatCompletion": obj(
            "A finished translation, as a chat completion.",
            {
                **chat_common,
                "object": {"const": "chat.completion"},
                "choices": array(
                    obj(
                        "The one answer.",
                        {
                            "index": {"const": 0},
                            "message": obj(
                                "The translation.",
                                {
                                    "role": {"const": "assistant"},
                                    "content": prop("string", "The translation."),
                                    "refusal": {"type": "null"},
                                },
                            ),
                            "logprobs": {"type": "null"},
                            "finish_reason": finish,
                        },
                    ),
                    "Exactly one choice.",
                ),
                "usage": ref("ChatUsage"),
            },
        ),
        "ChatCompletionChunk": obj(
            "One `data:` line of a streamed completion.",
            {
                **chat_common,
                "object": {"const": "chat.completion.chunk"},
                "choices": array(
                    obj(
                        "The delta (no choice in the final usage chunk).",
                        {
                            "index": {"const": 0},
                            "delta": obj(
                                "First chunk: the role; then new text; last: empty.",
                                {"role": {"const": "assistant"}, "content": {"type": "string"}},
                                optional=("role", "content"),
                            ),
                            "logprobs": {"type": "null"},
                            "finish_reason": finish,
                        },
                    ),
                    "Zero or one choice.",
                ),
                "usage": {
                    "description": "Only with `include_usage`: null, except in the last chunk.",
                    "anyOf": [ref("ChatUsage"), {"type": "null"}],
                },
            },
            optional=("usage",),
        ),
        "ChatUsage": usage,
        "OpenAIErrorResponse": obj(
            "OpenAI's error shape.",
            {
                "error": obj(
                    "The error.",
                    {
                        "message": {"type": "string"},
                        "type": prop("string", "OpenAI's error type, e.g. `invalid_request_error`."),
                        "param": prop(["string", "null"], "The field at fault."),
                        "code": ref("ErrorCode"),
                    },
                )
            },
        ),
        # --- LibreTranslate
        "LibreTranslateRequest": obj(
            "LibreTranslate's translate request (JSON or form fields).",
            {
                "q": one_text_or_many("The text, or a list of texts (blank items come back as is)."),
                "source": prop(
                    ["string", "null"],
                    "A language code or `auto` (also when absent or empty).",
                    default="auto",
                    enum=["auto", *language_names(sources), "", None],
                ),
                "target": prop(
                    "string", "The language code to translate into.", enum=language_names(targets)
                ),
                "format": prop(
                    ["string", "null"],
                    "`html`: keep tags, translate the text between them; `text` (also empty, null) does not.",
                    enum=["text", "html", "", None],
                ),
                "alternatives": prop("integer", "Accepted; always answered with empty lists.", minimum=0),
                "api_key": prop("string", "The API key, when keys are configured."),
            },
            optional=("source", "format", "alternatives", "api_key"),
        ),
        "LibreTranslateResponse": obj(
            "A list in, lists out.",
            {
                "translatedText": {
                    "description": "The translation(s).",
                    "anyOf": [{"type": "string"}, array({"type": "string"}, "One per text.")],
                },
                "detectedLanguage": {
                    "description": "With `source: auto` only.",
                    "anyOf": [ref("Detection"), array(ref("Detection"), "One per text.")],
                },
                "alternatives": {"type": "array", "description": "Empty (when `alternatives` > 0)."},
            },
            optional=("detectedLanguage", "alternatives"),
        ),
        "Detection": detection,
        "DetectRequest": obj(
            "Text to identify.",
            {"q": prop("string", "The text.", pattern=NOT_BLANK), "api_key": prop("string", "The API key.")},
            optional=("api_key",),
        ),
        "LibreTranslateLanguage": obj(
            "A source language and its targets.",
            {
                "code": prop("string", "Language code."),
                "name": prop("string", "English name."),
                "targets": array({"type": "string"}, "Codes it translates into."),
            },
        ),
        "FrontendSettings": {
            "type": "object",
            "description": "What LibreTranslate's web page reads at start-up (`apiKeys`, `keyRequired`, "
            "`charLimit`, `language`, ...).",
            "required": ["keyRequired", "charLimit"],
        },
        "LibreTranslateError": obj(
            "LibreTranslate's error shape.", {"error": prop("string", "The message.")}
        ),
        # --- DeepL
        "DeepLTranslateRequest": obj(
            "DeepL's translate request (JSON, or form fields with `text` repeated). `formality`, "
            "`split_sentences`, `preserve_formatting`, `context`, `model_type` are ignored.",
            {
                "text": one_text_or_many("The texts."),
                "target_lang": prop(
                    "string",
                    "`EN`, `EN-US`, `EN-GB` (all the same English) or `ZH`, `ZH-HANS`, as the models "
                    "allow (case-insensitive); `ZH-HANT` is refused.",
                    enum=deepl_targets,
                ),
                "source_lang": prop(
                    ["string", "null"],
                    "`ZH`, `EN`, ... (case-insensitive); detected when absent or empty.",
                    enum=[*(lang.upper() for lang in sorted(sources)), "", None],
                ),
                "tag_handling": prop(
                    ["string", "null"],
                    "Keep the tags, translate the text between them (empty or null: plain text).",
                    enum=["html", "xml", "", None],
                ),
                "glossary_id": prop(
                    ["string", "null"],
                    "Refused (`invalid_option`) unless empty: liuyi has no glossaries.",
                    enum=["", None],
                ),
                "glossary_ids": prop(
                    ["array", "null"], "Refused unless empty, as `glossary_id`.", maxItems=0
                ),
                "auth_key": prop("string", "Legacy way to send the key."),
            },
            optional=("source_lang", "tag_handling", "glossary_id", "glossary_ids", "auth_key"),
        ),
        "DeepLTranslateResponse": obj(
            "One translation per text, in order.",
            {
                "translations": array(
                    obj(
                        "A translation.",
                        {
                            "detected_source_language": prop("string", "`ZH` or `EN`."),
                            "text": prop("string", "The translation."),
                            "billed_characters": prop("integer", "Characters of the source text."),
                        },
                    ),
                    "One per text.",
                )
            },
        ),
        "DeepLLanguage": obj(
            "A language.",
            {
                "language": prop("string", "DeepL code."),
                "name": prop("string", "English name."),
                "supports_formality": {"const": False},
            },
            optional=("supports_formality",),
        ),
        "DeepLUsage": obj(
            "Characters translated by this process through the DeepL API; no quota.",
            {"character_count": {"type": "integer"}, "character_limit": {"type": "integer"}},
        ),
        "DeepLError": obj(
            "DeepL's error shape.", {"message": prop("string", "The message."), "detail": ref("ErrorCode")}
        ),
    }
    for form, body in (
        ("LibreTranslateForm", "LibreTranslateRequest"),
        ("DeepLTranslateForm", "DeepLTranslateRequest"),
    ):
        schemas[form] = form_fields(schemas[body])
    return schemas


def chat_stream_example(model: str, request_id: str, deltas: Sequence[str]) -> str:
    common = {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, str], reason: str | None = None) -> dict[str, Any]:
        return {
            **common,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}],
        }

    lines = [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": text}) for text in deltas),
        chunk({}, "stop"),
    ]
    return "".join(f"data: {dumps(line)}\n\n" for line in lines) + "data: [DONE]\n\n"


def compat_paths(model: str, request_id: str, text: str, deltas: Sequence[str]) -> dict[str, Schema]:
    translation = "".join(deltas)
    chat = {"model": "liuyi-zh-en", "messages": [{"role": "user", "content": text}]}
    completion = {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": translation, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }
    detected = {"confidence": 100.0, "language": "zh"}
    return {
        "/v1/chat/completions": {
            "post": operation(
                "openai",
                "chatCompletions",
                "Translate, as an OpenAI chat completion",
                CHAT_DESCRIPTION,
                {
                    "200": {
                        "description": "The completion (JSON), or its chunks (SSE) when `stream` is true.",
                        "headers": {"X-Request-ID": {"$ref": "#/components/headers/X-Request-ID"}},
                        "content": {
                            **json_content(ref("ChatCompletion"), completion=completion),
                            SSE: {
                                "schema": sse_event(
                                    "`data: <ChatCompletionChunk>` events, then `data: [DONE]` (or one "
                                    "`data: <OpenAIErrorResponse>` after a failure).",
                                    {
                                        "anyOf": [
                                            {"const": "[DONE]"},
                                            json_text(
                                                {
                                                    "anyOf": [
                                                        ref("ChatCompletionChunk"),
                                                        ref("OpenAIErrorResponse"),
                                                    ]
                                                }
                                            ),
                                        ]
                                    },
                                ),
                                "example": chat_stream_example(model, request_id, deltas),
                            },
                        },
                    },
                    **error_refs("openai", (*TRANSLATING, 404)),
                },
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
                "Translate, LibreTranslate-style",
                "`q` may be a list; `format: html` keeps the markup. With `source: auto`, a text already "
                "in the target language comes back unchanged.",
                {
                    "200": json_response(
                        "The translation(s).",
                        ref("LibreTranslateResponse"),
                        one={"translatedText": translation},
                        auto={"translatedText": [translation], "detectedLanguage": [detected]},
                    ),
                    **error_refs("libretranslate", TRANSLATING),
                },
                requestBody=fields_body(
                    ref("LibreTranslateRequest"),
                    ref("LibreTranslateForm"),
                    one={"q": text, "source": "zh", "target": "en"},
                    auto={"q": [text], "source": "auto", "target": "en"},
                    html={"q": f"<p>{text}</p>", "target": "en", "format": "html"},
                ),
            )
        },
        "/detect": {
            "post": operation(
                "libretranslate",
                "libreDetect",
                "Detect the language",
                "Han characters vs Latin letters; `confidence` is 0-100.",
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
                "Languages (LibreTranslate)",
                "One entry per source language of the loaded models.",
                {"200": json_response("The languages.", array(ref("LibreTranslateLanguage"), "Languages."))},
                security=OPEN,
            )
        },
        "/frontend/settings": {
            "get": operation(
                "libretranslate",
                "libreFrontendSettings",
                "Settings for LibreTranslate's web page",
                "Some clients read it to learn the limits.",
                {"200": json_response("The settings.", ref("FrontendSettings"))},
                security=OPEN,
            )
        },
        "/v2/translate": {
            "post": operation(
                "deepl",
                "deeplTranslate",
                "Translate, DeepL-style",
                "For DeepL clients (`server_url=http://host:8000`).",
                {
                    "200": json_response(
                        "The translations.",
                        ref("DeepLTranslateResponse"),
                        en={
                            "translations": [
                                {
                                    "detected_source_language": "ZH",
                                    "text": translation,
                                    "billed_characters": 4,
                                }
                            ]
                        },
                    ),
                    **error_refs("deepl", TRANSLATING),
                },
                requestBody=fields_body(
                    ref("DeepLTranslateRequest"),
                    ref("DeepLTranslateForm"),
                    en={"text": [text], "target_lang": "EN-US"},
                ),
            )
        },
        "/v2/languages": deepl_reads(
            "deeplLanguages",
            "Languages (DeepL)",
            "`type` (query or body): `source` (default) or `target`.",
            array(ref("DeepLLanguage"), "Languages."),
            kind=True,
        ),
        "/v2/usage": deepl_reads(
            "deeplUsage", "Usage (DeepL)", "Characters translated through this API.", ref("DeepLUsage")
        ),
    }


def deepl_reads(op_id: str, summary: str, description: str, schema: Schema, *, kind: bool = False) -> Schema:
    """/v2/languages and /v2/usage: GET or POST, parameters in the query or in a body."""
    names: dict[str, Schema] = {"auth_key": {"type": "string", "description": "Legacy way to send the key."}}
    if kind:
        names["type"] = {"type": "string", "enum": ["source", "target"], "default": "source"}
    parameters = [{"name": name, "in": "query", "schema": value} for name, value in names.items()]
    fields = {"type": "object", "properties": names}
    responses = {"200": json_response("The answer.", schema), **error_refs("deepl", READING)}
    get = operation("deepl", op_id, summary, description, responses, parameters=parameters)
    post = operation(
        "deepl",
        f"{op_id}Post",
        summary,
        description,
        responses,
        parameters=parameters,
        requestBody={"required": False, "content": fields_body(fields)["content"]},
    )
    return {"get": get, "post": post}
