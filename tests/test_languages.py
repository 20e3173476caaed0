"""Language codes clients send, and the zh/en guess behind source "auto"."""

from __future__ import annotations

import pytest

from decoding import (
    LANGUAGE_TABLE,
    Language,
    ModelRegistry,
    UnsupportedDirectionError,
    UnsupportedLanguageError,
    detect_language,
    normalize_language,
)


@pytest.mark.parametrize(
    ("code", "expected"),
    [("zh", "zh"), ("ZH-HANS", "zh"), ("zh_CN", "zh"), ("en-US", "en"), ("EN", "en"), ("auto", "auto")],
)
def test_common_spellings_are_accepted(code: str, expected: str) -> None:
    assert normalize_language(code) == expected


@pytest.mark.parametrize("language", LANGUAGE_TABLE, ids=lambda language: language.code)
def test_every_spelling_in_the_language_table_names_its_language(language: Language) -> None:
    for spelling in (language.code, *language.aliases):
        assert normalize_language(spelling) == normalize_language(spelling.upper()) == language.code
        assert normalize_language(spelling.replace("-", "_")) == language.code


@pytest.mark.parametrize("code", ["fr", "", "klingon", "zh-xx"])
def test_unknown_languages_are_rejected_with_their_code(code: str) -> None:
    with pytest.raises(UnsupportedLanguageError) as info:
        normalize_language(code)
    assert info.value.code == "unsupported_language"


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("今天天气很好。", "zh"),
        ("The weather is nice.", "en"),
        ("我用 Python 写代码", "zh"),
        ("I love 北京 very much indeed", "en"),
        ("𠀀𠀁𠀂 ok", "zh"),  # CJK Extension B (outside the BMP)
        ("𪚥𫝀𬺰 and", "zh"),  # Extensions C-F
        ("〇 和 々 ab", "zh"),
        ("ｅｎｇｌｉｓｈ only", "en"),  # fullwidth Latin is not Han
    ],
)
def test_detection(text: str, language: str) -> None:
    assert detect_language(text).language == language


def test_registry_resolves_auto_and_rejects_missing_directions(default_bundle) -> None:  # type: ignore[no-untyped-def]
    registry = ModelRegistry([default_bundle])
    assert registry.resolve("auto", None, "你好") is default_bundle
    assert registry.resolve("zh-CN", "en", "你好") is default_bundle
    assert registry.resolve("auto", None, "🍎 123") is default_bundle  # nothing to detect: any model will do
    with pytest.raises(UnsupportedDirectionError) as info:
        registry.resolve("en", "zh", "hello")
    assert info.value.code == "unsupported_direction" and "available: zh-en" in info.value.message
