"""Word-level vocabularies (the cn2en GRU model): one id per whole word, unknown words dropped.

Files (``tokenizer.files``):

* ``source_vocab`` and ``target_vocab`` — each a JSON list of strings where the position is the id:
  ``["SOS", "EOS", "那", "", "是", ...]``. The entries at the special ids (``tokens.decoder_start``,
  ``tokens.eos``, ``tokens.pad``) are placeholders: they are never looked up and never rendered.
  The first occurrence of a duplicated word wins, as in the reference ``Lang.word2index``.

Options (``tokenizer.options``):

* ``normalize: "cn2en"`` (required) — the reference's ``normalize()``: lower-case, strip, and put a
  space on both sides of every character that is not an ASCII letter, ``'``, ``"`` or a space; so
  Chinese is split into single characters and digits into single digits. Words are the pieces of
  ``split(' ')``; empty words and words missing from the vocabulary are *dropped* (there is no
  ``<unk>``), then EOS is appended. This must match the reference exactly: the model was trained on
  it, and the parity tests compare ids with the reference's ``tensorsFromSentence``.
* ``render: "english"`` (default) or ``"plain"`` — how target words become text. ``"plain"`` is the
  reference's ``' '.join(words).strip()``. ``"english"`` undoes what normalization did to the
  training targets (see ``_EnglishRenderer``): punctuation attached, digits joined, sentences and
  "I" capitalized.
* ``cased: {"tom": "Tom", "tv": "TV", ...}`` (optional) — words always written this way (also before
  an apostrophe: ``tom's`` -> ``Tom's``). The training targets were lower-cased, so the model cannot
  know; the converter lists unambiguous names from the vocabulary.

Every rendering rule looks only at the current and earlier words, so the incremental decoder emits
each word's text as soon as the word arrives and holds nothing back; ``decode`` runs the very same
renderer over all ids, which makes "incremental outputs joined == decode" hold by construction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from .._errors import ManifestError
from .._manifest import SpecialTokens, TokenizerSpec
from ._base import Encoding, IncrementalDecoder

# normalize(): characters kept as they are; everything else becomes " c "
_KEPT = frozenset("abcdefghijklmnopqrstuvwxyz'\" ")
_NO_SPACE_BEFORE = frozenset({".", ",", "?", "!", ":", ";", "%"})
_SENTENCE_END = frozenset({".", "?", "!"})
_ATTACH_TO_NEXT = frozenset({"$"})
# normalize() split "twenty-one" and "don’t" into three words each; join them back
_JOINERS = frozenset({"-", "’"})
# between digits: "3 . 5" -> "3.5", "7 : 30" -> "7:30"
_NUMBER_INFIXES = frozenset({".", ":"})
_ORDINAL_SUFFIXES = frozenset({"st", "nd", "rd", "th"})
_RENDERERS = ("english", "plain")


def normalize(text: str) -> str:
    """The reference's ``normalize()``, character for character (see the module docstring)."""
    return "".join(c if c in _KEPT else f" {c} " for c in text.lower().strip()).strip()


class _Renderer(Protocol):
    def render(self, word: str) -> str: ...


class WordVocabTokenizer:
    """Word-per-id tokenizer: reference-exact encoding, English rendering of target words."""

    def __init__(
        self,
        *,
        source_words: Sequence[str],
        target_words: Sequence[str],
        tokens: SpecialTokens,
        render: str = "english",
        cased: Mapping[str, str] | None = None,
    ) -> None:
        if render not in _RENDERERS:
            raise ValueError(f"render must be one of {', '.join(_RENDERERS)}, not {render!r}")
        special = {t for t in (tokens.decoder_start, tokens.eos, tokens.pad, tokens.unk) if t is not None}
        for name, words in (("source", source_words), ("target", target_words)):
            if not all(isinstance(word, str) for word in words):
                raise ValueError(f"the {name} vocabulary must be a list of strings")
            if any(not 0 <= t < len(words) for t in special):
                raise ValueError(f"a special token id is outside the {name} vocabulary ({len(words)} words)")
        self._ids: dict[str, int] = {}
        for index, word in enumerate(source_words):
            if index not in special:
                self._ids.setdefault(word, index)
        self._words = list(target_words)
        self._skip = frozenset(special)
        self._eos = tokens.eos
        self._render = render
        self._cased = dict(cased or {})

    @classmethod
    def load(cls, bundle_dir: Path, spec: TokenizerSpec, tokens: SpecialTokens) -> WordVocabTokenizer:
        """Read the two vocabulary files a manifest names.

        Raises:
            ManifestError: a file role or option is missing or wrong, or a vocabulary is malformed.
        """
        for role in ("source_vocab", "target_vocab"):
            if role not in spec.files:
                raise ManifestError(bundle_dir, f"tokenizer.files.{role} is missing", file="manifest.json")
        if spec.options.get("normalize") != "cn2en":
            raise ManifestError(
                bundle_dir, "tokenizer.options.normalize must be 'cn2en' (the only one)", file="manifest.json"
            )
        cased = spec.options.get("cased", {})
        if not isinstance(cased, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in cased.items()
        ):
            raise ManifestError(
                bundle_dir, "tokenizer.options.cased must map words to words", file="manifest.json"
            )
        source_words = _read_word_list(bundle_dir, spec.files["source_vocab"])
        target_words = _read_word_list(bundle_dir, spec.files["target_vocab"])
        try:
            return cls(
                source_words=source_words,
                target_words=target_words,
                tokens=tokens,
                render=spec.options.get("render", "english"),
                cased=cased,
            )
        except ValueError as exc:
            raise ManifestError(bundle_dir, str(exc), file="manifest.json") from None

    def encode(self, text: str) -> Encoding:
        ids: list[int] = []
        unknown = 0
        for word in normalize(text).split(" "):
            if not word:
                continue
            index = self._ids.get(word)
            if index is None:
                # dropped, like the reference; whitespace that was not ' ' (a tab) is no lost text
                unknown += sum(not c.isspace() for c in word)
            else:
                ids.append(index)
        return Encoding(ids=[*ids, self._eos], unknown_chars=unknown)

    def decode(self, ids: Sequence[int]) -> str:
        renderer = self._renderer()
        return "".join(renderer.render(word) for word in self._target_words(ids))

    def for_direction(self, source_lang: str, target_lang: str) -> WordVocabTokenizer:
        return self  # one direction per bundle

    def incremental_decoder(self) -> IncrementalDecoder:
        return _IncrementalWordDecoder(self)

    def _target_words(self, ids: Sequence[int]) -> list[str]:
        return [self._word(i) for i in ids if i not in self._skip]

    def _word(self, index: int) -> str:
        if not 0 <= index < len(self._words):
            raise ValueError(f"token id {index} is outside the target vocabulary ({len(self._words)} words)")
        return self._words[index]

    def _renderer(self) -> _Renderer:
        if self._render == "plain":
            return _PlainRenderer()
        return _EnglishRenderer(self._cased)


class _IncrementalWordDecoder:
    """Renders each id the moment it arrives: no rule needs a later word, so nothing is held back."""

    def __init__(self, tokenizer: WordVocabTokenizer) -> None:
        self._tokenizer = tokenizer
        self._renderer = tokenizer._renderer()

    def decode(self, token_id: int) -> str:
        if token_id in self._tokenizer._skip:
            return ""
        return self._renderer.render(self._tokenizer._word(token_id))

    def flush(self) -> str:
        return ""


class _PlainRenderer:
    """The reference's ``' '.join(words).strip()``: one space per separator, none at either end."""

    def __init__(self) -> None:
        self._position = 0  # index of the next word
        self._last_shown: int | None = None  # index of the last non-empty word

    def render(self, word: str) -> str:
        position, self._position = self._position, self._position + 1
        if not word:  # its separators are written (or stripped) with the next non-empty word
            return ""
        gap = 0 if self._last_shown is None else position - self._last_shown
        self._last_shown = position
        return " " * gap + word


class _EnglishRenderer:
    """Clean English from lower-cased, space-separated training-style words.

    Spacing: one space between words, except none before ``. , ? ! : ; %`` and ``'s``-like words,
    none after ``$``, around ``-`` and ``’``, between digits (``1 7`` -> ``17``), in ``3.5`` / ``7:30``
    and before ordinal suffixes (``1 st`` -> ``1st``). A standalone ``"`` opens a quotation (attached
    to the next word) or closes one (attached to the previous word) by parity of the quotes so far.
    The empty word renders as nothing and changes nothing.

    Case: the first letter of a sentence (the first word, or the first word with a letter or digit
    after ``. ? !``) is upper-cased, also behind leading quotes (``"trust`` -> ``"Trust``); ``i`` and
    ``i'm``/``i'll``/``i've``/``i'd`` become ``I...``; words in ``cased`` take their listed form.
    """

    def __init__(self, cased: Mapping[str, str]) -> None:
        self._cased = {"i": "I", **cased}
        self._started = False  # something has been written
        self._glue = False  # the next word attaches to the previous one
        self._capitalize = True  # the next word with a letter or digit starts a sentence
        self._quote_open = False
        self._previous: tuple[str, str] = ("", "")  # the last two non-empty words, most recent first

    def render(self, word: str) -> str:
        if not word:
            return ""
        previous, before_previous = self._previous
        if word == '"':
            closing = self._quote_open
            space = self._started and not self._glue and not closing
            self._quote_open = not closing
            glue_after = not closing
        else:
            space = (
                self._started
                and not self._glue
                and not _attaches_to_previous(word, previous, before_previous)
            )
            if word.count('"') % 2:  # '"trust' opens, 'old"' closes
                self._quote_open = not self._quote_open
            glue_after = word in _ATTACH_TO_NEXT or word in _JOINERS
        text = self._case(word)
        self._started = True
        self._glue = glue_after
        self._previous = (word, previous)
        return (" " if space else "") + text

    def _case(self, word: str) -> str:
        body = word.lstrip('"')
        quotes = word[: len(word) - len(body)]
        base, apostrophe, rest = body.partition("'")
        if base in self._cased:
            body = self._cased[base] + apostrophe + rest
        if any(c.isalnum() for c in body):
            if self._capitalize and body[:1].isalpha():
                body = body[0].upper() + body[1:]
            self._capitalize = False
        if word in _SENTENCE_END:
            self._capitalize = True
        return quotes + body


def _attaches_to_previous(word: str, previous: str, before_previous: str) -> bool:
    """No space between ``previous`` and ``word``, decided from the words so far only."""
    if word in _NO_SPACE_BEFORE or word in _JOINERS or word.startswith("'"):
        return True
    if _is_number(previous):
        return _is_number(word) or word in _ORDINAL_SUFFIXES
    return _is_number(word) and previous in _NUMBER_INFIXES and _is_number(before_previous)


def _is_number(word: str) -> bool:
    return word.isascii() and word.isdigit()


def _read_word_list(bundle_dir: Path, name: str) -> list[str]:
    try:
        words = json.loads((bundle_dir / name).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(bundle_dir, f"not valid JSON ({exc})", file=name) from None
    if not isinstance(words, list) or not all(isinstance(word, str) for word in words):
        raise ManifestError(bundle_dir, "expected a JSON list of strings (position = id)", file=name)
    return words
