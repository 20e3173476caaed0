"""The LibreTranslate-compatible API, driven by the ``libretranslatepy`` client against a real server
(it sends form-encoded bodies with urllib), and by httpx for what that client cannot send (JSON,
``q`` lists, ``format``), and for exact error bodies and statuses."""

from __future__ import annotations

import json
from typing import Any
from urllib.error import HTTPError

import httpx
import pytest
from libretranslatepy import LibreTranslateAPI

from decoding import Bundle
from server import Settings
from tests._live import LiveServer, gated

TEXT = "我很好。"


def http_error(info: pytest.ExceptionInfo[HTTPError]) -> tuple[int, dict[str, Any], Any]:
    """(status, body, headers) of an error urllib raised; closes its response."""
    with info.value as error:
        return error.code, json.loads(error.read()), error.headers


def test_client_translates_with_explicit_and_auto_source(live: LiveServer, default_bundle: Bundle) -> None:
    client = LibreTranslateAPI(live.url)
    expected = default_bundle.translate(TEXT).translation
    assert client.translate(TEXT, "zh", "en") == expected
    assert client.translate(TEXT, "auto", "en") == expected
    assert client.translate(TEXT, "zh-Hans", "en") == expected  # LibreTranslate's newer code


def test_client_detects_chinese_and_english(live: LiveServer) -> None:
    client = LibreTranslateAPI(live.url)
    assert client.detect(TEXT) == [{"confidence": 100.0, "language": "zh"}]
    assert client.detect("How are you today?") == [{"confidence": 100.0, "language": "en"}]
    [mixed] = client.detect("我 am")
    assert mixed["language"] == "zh" and 50 < mixed["confidence"] < 100


def test_client_languages_lists_sources_with_their_targets(live: LiveServer) -> None:
    assert LibreTranslateAPI(live.url).languages() == [{"code": "zh", "name": "Chinese", "targets": ["en"]}]


def test_auto_source_reports_detected_language_in_percent(live: LiveServer, default_bundle: Bundle) -> None:
    response = httpx.post(f"{live.url}/translate", json={"q": TEXT, "source": "auto", "target": "en"})
    assert response.json() == {
        "translatedText": default_bundle.translate(TEXT).translation,
        "detectedLanguage": {"confidence": 100.0, "language": "zh"},
    }
    explicit = httpx.post(f"{live.url}/translate", json={"q": TEXT, "source": "zh", "target": "en"})
    assert "detectedLanguage" not in explicit.json()


def test_q_list_is_translated_in_order_as_json_and_as_repeated_form_fields(
    live: LiveServer, default_bundle: Bundle
) -> None:
    texts = ["我很好。", "我爱你。", "今天天气很好。"]
    expected = [default_bundle.translate(text).translation for text in texts]
    as_json = httpx.post(f"{live.url}/translate", json={"q": texts, "source": "auto", "target": "en"})
    assert as_json.json()["translatedText"] == expected
    assert as_json.json()["detectedLanguage"] == [{"confidence": 100.0, "language": "zh"}] * 3
    as_form = httpx.post(f"{live.url}/translate", data={"q": texts, "source": "zh", "target": "en"})
    assert as_form.json() == {"translatedText": expected}


def test_list_longer_than_the_batch_is_not_refused_as_overload(default_bundle: Bundle) -> None:
    texts = [f"我很好。{'好' * n}" for n in range(12)]
    settings = Settings(max_concurrent_streams=2, max_queued=1, cache_size=0)
    with LiveServer(settings, bundles=[default_bundle]) as server:
        response = httpx.post(f"{server.url}/translate", json={"q": texts, "source": "zh", "target": "en"})
    assert response.status_code == 200
    assert response.json()["translatedText"] == [default_bundle.translate(t).translation for t in texts]


def test_text_already_in_the_target_language_comes_back_unchanged(live: LiveServer) -> None:
    body = {"q": ["Hello there.", TEXT, "  "], "source": "auto", "target": "en"}
    response = httpx.post(f"{live.url}/translate", json=body)
    assert response.json()["translatedText"][0] == "Hello there."
    assert response.json()["translatedText"][2] == "  "  # blank items of a list are kept
    assert [d["language"] for d in response.json()["detectedLanguage"]] == ["en", "zh", "en"]


def test_text_without_letters_comes_back_unchanged_whatever_the_target(live: LiveServer) -> None:
    for target in ("en", "zh"):
        response = httpx.post(f"{live.url}/translate", json={"q": ["2024", "🙂 !"], "target": target})
        assert response.status_code == 200
        assert response.json()["translatedText"] == ["2024", "🙂 !"]
        assert [d["confidence"] for d in response.json()["detectedLanguage"]] == [0.0, 0.0]


def test_html_keeps_tags_and_translates_the_text_between_them(
    live: LiveServer, default_bundle: Bundle
) -> None:
    def tr(text: str) -> str:
        return default_bundle.translate(text).translation

    document = (
        '<p class="x">我很好。</p>\n<script>var s = "我爱你。";</script><br/><b>我爱你。</b> &amp; 2024'
    )
    response = httpx.post(f"{live.url}/translate", json={"q": document, "target": "en", "format": "html"})
    expected = (
        f'<p class="x">{tr("我很好。")}</p>\n<script>var s = "我爱你。";</script><br/><b>{tr("我爱你。")}</b>'
        " &amp; 2024"
    )
    assert response.json()["translatedText"] == expected


def test_alternatives_are_accepted_and_empty(live: LiveServer) -> None:
    single = httpx.post(
        f"{live.url}/translate", data={"q": TEXT, "source": "zh", "target": "en", "alternatives": "3"}
    )
    assert single.json()["alternatives"] == []
    many = httpx.post(f"{live.url}/translate", json={"q": [TEXT, TEXT], "target": "en", "alternatives": 2})
    assert many.json()["alternatives"] == [[], []]


def test_frontend_settings_describe_limits_and_auth(live: LiveServer) -> None:
    settings = httpx.get(f"{live.url}/frontend/settings").json()
    assert settings["keyRequired"] is False
    assert settings["charLimit"] == Settings().max_input_chars
    assert settings["language"]["source"]["code"] == "auto"
    assert settings["language"]["target"]["code"] == "en"


def test_client_gets_400_for_an_unsupported_language(live: LiveServer) -> None:
    with pytest.raises(HTTPError) as info:
        LibreTranslateAPI(live.url).translate(TEXT, "zh", "de")
    status, body, _ = http_error(info)
    assert status == 400
    assert list(body) == ["error"] and "'de' is not supported" in body["error"]


@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        ("/translate", {"target": "en"}, "'q' is required"),
        ("/translate", {"q": "  ", "target": "en"}, "'q' is empty"),
        ("/translate", {"q": [], "target": "en"}, "'q' is an empty list"),
        ("/translate", {"q": [TEXT, 3], "target": "en"}, "list of strings"),
        ("/translate", {"q": TEXT}, "'target' is required"),
        ("/translate", {"q": TEXT, "target": "en", "format": "pdf"}, "'format'"),
        ("/translate", {"q": TEXT, "target": "en", "alternatives": -1}, "'alternatives'"),
        ("/translate", {"q": TEXT, "source": "en", "target": "zh"}, "no model translates en->zh"),
        ("/translate", {"q": TEXT, "source": "klingon", "target": "en"}, "'klingon' is not supported"),
        ("/detect", {}, "'q' is required"),
        ("/detect", {"q": ""}, "'q' is empty"),
    ],
)
async def test_bad_input_is_400_with_a_libretranslate_error(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], fragment: str
) -> None:
    response = await http.post(path, json=body)
    assert response.status_code == 400
    assert list(response.json()) == ["error"]
    assert fragment in response.json()["error"]


async def test_unreadable_bodies_get_libretranslate_errors(http: httpx.AsyncClient) -> None:
    broken = await http.post("/translate", content=b"{", headers={"content-type": "application/json"})
    assert broken.status_code == 400 and list(broken.json()) == ["error"]
    plain = await http.post("/translate", content=b"q=x", headers={"content-type": "text/plain"})
    assert plain.status_code == 415 and list(plain.json()) == ["error"]
    multipart = await http.post(
        "/translate", content=b"garbage", headers={"content-type": "multipart/form-data; boundary=xyz"}
    )
    assert multipart.status_code == 400 and list(multipart.json()) == ["error"]
    too_long = await http.post("/translate", json={"q": "好" * 5001, "target": "en"})
    assert too_long.status_code == 413 and "limit is 5000" in too_long.json()["error"]


async def test_multipart_form_bodies_are_read(http: httpx.AsyncClient, default_bundle: Bundle) -> None:
    response = await http.post("/translate", files={"q": (None, TEXT), "target": (None, "en")})
    assert response.json()["translatedText"] == default_bundle.translate(TEXT).translation


def test_bad_or_missing_api_key_is_403_and_the_right_key_works(default_bundle: Bundle) -> None:
    with LiveServer(Settings(api_keys=("secret",)), bundles=[default_bundle]) as server:
        for key in ("wrong", None):
            for call in (
                lambda c: c.translate(TEXT, "zh", "en"),
                lambda c: c.detect(TEXT),
            ):
                with pytest.raises(HTTPError) as info:
                    call(LibreTranslateAPI(server.url, api_key=key))
                status, body, _ = http_error(info)
                assert status == 403 and list(body) == ["error"]
        client = LibreTranslateAPI(server.url, api_key="secret")
        assert client.translate(TEXT, "zh", "en") == default_bundle.translate(TEXT).translation
        assert client.detect(TEXT)[0]["language"] == "zh"
        assert LibreTranslateAPI(server.url).languages()  # public, as in LibreTranslate


def test_overload_is_429_with_retry_after_then_recovers(default_bundle: Bundle) -> None:
    settings = Settings(max_concurrent_streams=1, max_queued=0, cache_size=0, retry_after=2)
    with (
        LiveServer(settings, bundles=[default_bundle]) as server,
        gated(default_bundle) as gate,
        httpx.Client() as http,
        http.stream("POST", f"{server.url}/v1/translate/stream", json={"text": TEXT}) as occupying,
    ):
        assert gate.wait_for_steps(1)  # the only slot is taken: its first decoder step waits at the gate
        with pytest.raises(HTTPError) as info:
            LibreTranslateAPI(server.url).translate("我爱你。", "zh", "en")
        status, error, headers = http_error(info)
        assert status == 429 and headers["Retry-After"] == "2" and list(error) == ["error"]
        gate.open()
        occupying.read()
        assert LibreTranslateAPI(server.url).translate("我爱你。", "zh", "en")
