"""The languages liuyi translates — the one table of their codes, names and spellings — and a fast
zh/en guess for ``source: "auto"``.

Everything else derives from :data:`LANGUAGE_TABLE`: the codes a manifest may name, the aliases the
native, OpenAI, DeepL and LibreTranslate APIs accept and document, the names their language lists
show, and the spellings the converters recognise in checkpoints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._errors import UnsupportedLanguageError


@dataclass(frozen=True, slots=True, kw_only=True)
class Language:
    """One language liuyi translates, and every way it is spelled."""

    code: str  # liuyi's own code (manifests, events, directions like "zh-en")
    name: str  # what language lists show (LibreTranslate's /languages, DeepL's /v2/languages)
    # What clients may send besides the code: BCP 47 tags, ISO 639-2/3, DeepL's and LibreTranslate's
    # spellings, the English name; matched case-insensitively, "_" == "-".
    aliases: tuple[str, ...]
    nllb_code: str  # NLLB-200's language token
    # M2M100's (fairseq) language code; its token is "__" + code + "__" (transformers' M2M100Tokenizer)
    m2m100_code: str
    # How checkpoints name it besides the code and the NLLB code (opus-mt ids, tokenizer configs).
    checkpoint_spellings: tuple[str, ...]


LANGUAGE_TABLE = (
    Language(
        code="zh",
        name="Chinese",
        aliases=("zh-CN", "zh-Hans", "zh-SG", "zh-TW", "zh-Hant", "zh-HK", "cmn", "zho", "chi", "chinese"),
        nllb_code="zho_Hans",
        m2m100_code="zh",
        checkpoint_spellings=("zhx", "cmn", "zho"),
    ),
    Language(
        code="en",
        name="English",
        aliases=("en-US", "en-GB", "eng", "english"),
        nllb_code="eng_Latn",
        m2m100_code="en",
        checkpoint_spellings=("eng",),
    ),
)
LANGUAGES = tuple(language.code for language in LANGUAGE_TABLE)  # ("zh", "en")
# code -> what clients may send for it, the code first (as the API documents list them)
CLIENT_SPELLINGS = {language.code: (language.code, *language.aliases) for language in LANGUAGE_TABLE}
_ALIASES = {
    **{alias.lower(): code for code, spellings in CLIENT_SPELLINGS.items() for alias in spellings},
    "auto": "auto",
}


def language_name(code: str) -> str:
    """The English name of a liuyi language code ("zh" -> "Chinese"); an unknown code names itself."""
    return next((language.name for language in LANGUAGE_TABLE if language.code == code), code)


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
