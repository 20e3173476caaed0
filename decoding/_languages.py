"""Language codes liuyi accepts, and a fast zh/en guess for ``source: "auto"``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._errors import UnsupportedLanguageError

LANGUAGES = ("zh", "en")
# What clients send: ISO 639-1/3, BCP 47 tags, DeepL's and LibreTranslate's spellings.
_ALIASES = {
    "zh": "zh",
    "zh-cn": "zh",
    "zh-hans": "zh",
    "zh-sg": "zh",
    "zh-tw": "zh",
    "zh-hant": "zh",
    "zh-hk": "zh",
    "cmn": "zh",
    "zho": "zh",
    "chi": "zh",
    "chinese": "zh",
    "en": "en",
    "en-us": "en",
    "en-gb": "en",
    "eng": "en",
    "english": "en",
    "auto": "auto",
}


def normalize_language(code: str, *, allow_auto: bool = True) -> str:
    """Map a client's language code to "zh", "en" (or "auto").

    Raises:
        UnsupportedLanguageError: anything else.
    """
    key = code.strip().lower().replace("_", "-") if isinstance(code, str) else ""
    language = _ALIASES.get(key)
    if language is None or (language == "auto" and not allow_auto):
        raise UnsupportedLanguageError(str(code), [*LANGUAGES, *(("auto",) if allow_auto else ())])
    return language


@dataclass(frozen=True, slots=True)
class Detection:
    language: str
    confidence: float  # 0..1


# Han ideographs in every block Unicode has (Unified, Extensions A-I in and beyond the BMP,
# Compatibility, radicals): rare characters of names and classical text live in Extension B and later.
_HAN = re.compile(
    "[\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0003134f\U00031350-\U000323af]"
)
_LATIN = re.compile("[A-Za-z]")


def detect_language(text: str) -> Detection:
    """Han characters vs Latin letters. A Han character carries about as much as a 3-4 letter word,
    so a text counts as Chinese once Han characters are at least a quarter as many as letters."""
    han = len(_HAN.findall(text))
    latin = len(_LATIN.findall(text))
    if han == 0 and latin == 0:
        return Detection(language="en", confidence=0.0)
    weight_zh, weight_en = han * 4.0, float(latin)
    language = "zh" if weight_zh >= weight_en else "en"
    return Detection(language=language, confidence=max(weight_zh, weight_en) / (weight_zh + weight_en))
