"""The DeepL-compatible API, driven by the official ``deepl`` client (``server_url`` pointed at a
real server on 127.0.0.1; it sends JSON), and by httpx for form bodies, legacy parameters and exact
error bodies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import deepl
import httpx
import pytest

from decoding import Bundle
from server import Settings
from tests._live import LiveServer, gated

TEXT = "我很好。"
AUTH = {"Authorization": "DeepL-Auth-Key test-key"}


@pytest.fixture
def translator(live: LiveServer) -> Iterator[deepl.Translator]:
    translator = deepl.Translator("test-key", server_url=live.url)
    yield translator
    translator.close()


def test_client_translates_one_text_and_reports_the_detected_language(
    translator: deepl.Translator, default_bundle: Bundle
) -> None:
    result = translator.translate_text(TEXT, target_lang="EN-US")
    assert isinstance(result, deepl.TextResult)
    assert result.text == default_bundle.translate(TEXT).translation
    assert result.detected_source_lang == "ZH"
    assert result.billed_characters == len(TEXT)


def test_client_translates_a_list_in_order_with_source_given(
    translator: deepl.Translator, default_bundle: Bundle
) -> None:
    texts = ["我很好。", "我爱你。"]
    results = translator.translate_text(texts, source_lang="ZH", target_lang="EN-GB")
    assert isinstance(results, list)
    assert [r.text for r in results] == [default_bundle.translate(t).translation for t in texts]
    assert [r.detected_source_lang for r in results] == ["ZH", "ZH"]


def test_text_already_in_the_target_language_comes_back_unchanged(translator: deepl.Translator) -> None:
    results = translator.translate_text(["Good morning.", TEXT], target_lang="EN-US")
    assert isinstance(results, list)
    assert results[0].text == "Good morning."
    assert [r.detected_source_lang for r in results] == ["EN", "ZH"]


def test_client_lists_languages_and_usage(translator: deepl.Translator) -> None:
    assert [(lang.code, lang.name) for lang in translator.get_source_languages()] == [("ZH", "Chinese")]
    targets = translator.get_target_languages()
    assert [lang.code for lang in targets] == ["EN-GB", "EN-US"]
    assert all(lang.supports_formality is False for lang in targets)
    before = translator.get_usage().character.count
    translator.translate_text("我爱你。", target_lang="EN-US")
    usage = translator.get_usage()
    assert usage.character.count == (before or 0) + len("我爱你。")
    assert not usage.any_limit_reached


def test_client_tag_handling_html_keeps_the_markup(
    translator: deepl.Translator, default_bundle: Bundle
) -> None:
    result = translator.translate_text("<p>我很好。</p>", target_lang="EN-US", tag_handling="html")
    assert isinstance(result, deepl.TextResult)
    assert result.text == f"<p>{default_bundle.translate(TEXT).translation}</p>"


def test_form_body_with_repeated_text_fields(live: LiveServer, default_bundle: Bundle) -> None:
    form = {"text": ["我很好。", "我爱你。"], "target_lang": "EN"}  # plain "EN" is still accepted
    response = httpx.post(f"{live.url}/v2/translate", data=form, headers=AUTH)
    assert response.status_code == 200
    assert response.json() == {
        "translations": [
            {
                "detected_source_language": "ZH",
                "text": default_bundle.translate(t).translation,
                "billed_characters": 4,
            }
            for t in form["text"]
        ]
    }


def test_languages_type_comes_from_query_or_body(live: LiveServer) -> None:
    by_query = httpx.get(f"{live.url}/v2/languages?type=target", headers=AUTH).json()
    by_form = httpx.post(f"{live.url}/v2/languages", data={"type": "target"}, headers=AUTH).json()
    assert by_query == by_form
    assert [lang["language"] for lang in by_query] == ["EN-GB", "EN-US"]
    assert httpx.get(f"{live.url}/v2/languages", headers=AUTH).json() == [
        {"language": "ZH", "name": "Chinese"}
    ]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"target_lang": "EN-US"}, "'text' is required"),
        ({"text": [], "target_lang": "EN-US"}, "'text' is an empty list"),
        ({"text": [TEXT, None], "target_lang": "EN-US"}, "list of strings"),
        ({"text": [TEXT]}, "'target_lang' is required"),
        ({"text": [TEXT], "target_lang": "ZH-HANT"}, "simplified Chinese"),
        ({"text": [TEXT], "target_lang": "DE"}, "'DE' is not supported"),
        ({"text": [TEXT], "source_lang": "ZH", "target_lang": "ZH"}, "no model translates zh->zh"),
        ({"text": [TEXT], "source_lang": "EN", "target_lang": "ZH-HANS"}, "no model translates en->zh"),
        ({"text": [TEXT], "source_lang": "XX", "target_lang": "EN-US"}, "'XX' is not supported"),
        ({"text": [TEXT], "target_lang": "EN-US", "tag_handling": "markdown"}, "'tag_handling'"),
        ({"text": [TEXT], "target_lang": "EN-US", "glossary_id": "g1"}, "glossaries"),
        ({"text": [TEXT], "target_lang": "EN-US", "glossary_id": {}}, "glossaries"),
        ({"text": [TEXT], "target_lang": "EN-US", "auth_key": None}, "'auth_key' must be a string"),
    ],
)
async def test_bad_input_is_400_with_a_deepl_error(
    http: httpx.AsyncClient, body: dict[str, Any], fragment: str
) -> None:
    response = await http.post("/v2/translate", json=body)
    assert response.status_code == 400
    assert set(response.json()) == {"message", "detail"}
    assert fragment in response.json()["message"]


@pytest.mark.parametrize(
    ("query", "body"), [("?type=both", None), ("?type=", None), ("?type=both", {"type": "source"})]
)
async def test_bad_languages_type_is_400_even_when_the_body_names_a_good_one(
    http: httpx.AsyncClient, query: str, body: dict[str, str] | None
) -> None:
    response = (
        await http.post(f"/v2/languages{query}", json=body)
        if body
        else await http.get(f"/v2/languages{query}")
    )
    assert response.status_code == 400
    assert response.json()["detail"] == "invalid_field"


def test_client_raises_deepl_exception_with_our_message(translator: deepl.Translator) -> None:
    with pytest.raises(deepl.DeepLException, match="simplified Chinese"):
        translator.translate_text(TEXT, target_lang="ZH-HANT")


def test_bad_key_is_authorization_exception_and_legacy_auth_key_works(default_bundle: Bundle) -> None:
    with LiveServer(Settings(api_keys=("secret",)), bundles=[default_bundle]) as server:
        wrong = deepl.Translator("wrong", server_url=server.url)
        with pytest.raises(deepl.AuthorizationException):
            wrong.translate_text(TEXT, target_lang="EN-US")
        with pytest.raises(deepl.AuthorizationException):
            wrong.get_usage()
        wrong.close()
        right = deepl.Translator("secret", server_url=server.url)
        result = right.translate_text(TEXT, target_lang="EN-US")
        assert isinstance(result, deepl.TextResult)
        assert result.text == default_bundle.translate(TEXT).translation
        right.close()
        legacy = httpx.post(
            f"{server.url}/v2/translate", data={"text": TEXT, "target_lang": "EN-US", "auth_key": "secret"}
        )
        assert legacy.status_code == 200
        missing = httpx.post(f"{server.url}/v2/translate", data={"text": TEXT, "target_lang": "EN-US"})
        assert missing.status_code == 403
        assert missing.json()["detail"] == "missing_api_key"


def test_overload_is_too_many_requests_then_recovers(
    default_bundle: Bundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deepl.http_client, "max_network_retries", 0)  # the client retries 429 by default
    settings = Settings(max_concurrent_streams=1, max_queued=0, cache_size=0, retry_after=2)
    with (
        LiveServer(settings, bundles=[default_bundle]) as server,
        gated(default_bundle) as gate,
        httpx.Client() as http,
        http.stream("POST", f"{server.url}/v1/translate/stream", json={"text": TEXT}) as occupying,
    ):
        translator = deepl.Translator("test-key", server_url=server.url)
        assert gate.wait_for_steps(1)  # the only slot is taken
        raw = http.post(f"{server.url}/v2/translate", json={"text": ["我爱你。"], "target_lang": "EN-US"})
        assert raw.status_code == 429 and raw.headers["retry-after"] == "2"
        assert raw.json()["detail"] == "overloaded"
        with pytest.raises(deepl.TooManyRequestsException):
            translator.translate_text("我爱你。", target_lang="EN-US")
        gate.open()
        occupying.read()
        result = translator.translate_text("我爱你。", target_lang="EN-US")
        translator.close()
    assert isinstance(result, deepl.TextResult)
    assert result.text == default_bundle.translate("我爱你。").translation
