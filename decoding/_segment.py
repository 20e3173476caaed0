r"""Split source text into the segments the model translates one at a time.

Read before "fixing" — each rule below is deliberate.

What ends a sentence
    * Chinese 。｡！？；‼⁇⁈⁉ always do. A run of marks stays together ("？！", "！！", "。。。").
    * English . ! ? and the ellipsis (… or ...) do only if the next character is not an ASCII letter
      or digit (3.14, example.com and the inner dots of U.S. are not ends), the next word does not
      start lowercase (e.g. the / "Wow!" she said / wait... what), and a lone "." does not follow an
      abbreviation (Mr, Dr, etc, e.g, U.S, one-letter initials) or a list number opening the line.
      An abbreviation that really ends a sentence only costs a longer segment, never text.
    * "……" ends a Chinese sentence like "。" unless lowercase Latin follows.
    * An English ";" does not end a sentence: its clauses translate better together. It is still a
      place to split a sentence that is too long (see below). The Chinese "；" does end one.
    * A line break always ends a sentence, punctuated or not: lines are never joined.

Closing quotes and brackets attach left
    ” ’ " ' ） ) 」 』 】 》 ] … right after an end mark close the sentence that mark ended:
    ``他说：“你好。”我走了。`` is ``他说：“你好。”`` + ``我走了。``. Cutting before the quote would
    leave the next segment starting with a dangling quote the model cannot pair.

Layout survives through ``separator``
    Spans exclude surrounding whitespace, so every gap between segments is pure whitespace. The
    translator emits ``separator`` before each segment instead: the gap's line breaks (as
    ``str.splitlines`` counts them, "\r\n" is one) written as "\n" — so "\n\n" keeps a paragraph —
    otherwise " " for an English target and "" for a Chinese one.

Sentences too long for the model
    ``fits`` (the caller tokenizes) and ``max_chars`` decide. A sentence that does not fit is split,
    never truncated: at clause punctuation (，、：；, and , : ; before a space, " - "), the mark kept
    on the left; then at whitespace; then by characters, binary-searching the longest prefix that
    fits without cutting a character cluster (base + combining marks, ZWJ emoji, flags, surrogate
    pairs). Neighbouring pieces are packed greedily into the longest run that still fits.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Iterator

from ._types import SourceSegment

Span = tuple[int, int]

_CJK_ENDERS = frozenset("。｡！？；‼⁇⁈⁉")
_LATIN_ENDERS = frozenset(".!?…")
_CLOSERS = frozenset("”’\"'）)」』】》〉〕〗〙〛］]｝}›»")
_CJK_CLAUSE = frozenset("，、：；﹐﹑")
_LATIN_CLAUSE = frozenset(",:;")
# Lowercased words that a "." follows without ending the sentence. Initialisms (e.g, U.S) and
# single capital letters (J. K. Rowling) are recognised by shape instead.
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "al", "cf", "fig", "vol", "pp"}
    | {"approx", "inc", "ltd", "corp", "co", "dept", "jan", "feb", "apr", "jun", "jul", "aug", "sep", "sept"}
    | {"oct", "nov", "dec"}
)
_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
# The line boundaries of str.splitlines, "\r\n" matched first so that it counts once.
_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def plan_segments(
    text: str,
    *,
    target_lang: str,
    fits: Callable[[str], bool],
    max_chars: int | None = None,
) -> list[SourceSegment]:
    """Cut ``text`` into sentences (or pieces of sentences) the model can take one at a time.

    Arguments:
        text: the whole input.
        target_lang: "zh" joins segments with no space; any other target with one space.
        fits: whether a piece of source text is short enough for the model.
        max_chars: an extra cap on each segment's length in characters.

    Returns:
        Segments in order, indexed from 0, whose spans reproduce ``text`` except for the whitespace
        between them; an empty list when ``text`` is only whitespace.

    Raises:
        ValueError: a single character (cluster) does not fit, or ``max_chars`` is below 1.
    """
    if max_chars is not None and max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")

    def ok(piece: str) -> bool:
        return (max_chars is None or len(piece) <= max_chars) and fits(piece)

    spans = [piece for a, b in _sentences(text) for piece in _fit(text, a, b, ok)]
    glue = "" if target_lang == "zh" else " "
    segments = []
    for index, (start, end) in enumerate(spans):
        if index == 0:
            separator = ""
        else:
            breaks = len(_LINE_BREAK.findall(text, spans[index - 1][1], start))
            separator = "\n" * breaks if breaks else glue
        segments.append(SourceSegment(index, start, end, text[start:end], separator))
    return segments


def _sentences(text: str) -> Iterator[Span]:
    """Sentence spans, line by line: a line break ends a sentence whatever precedes it."""
    line_start = 0
    for match in _LINE_BREAK.finditer(text):
        yield from _line_sentences(text, line_start, match.start())
        line_start = match.end()
    yield from _line_sentences(text, line_start, len(text))


def _line_sentences(text: str, start: int, end: int) -> Iterator[Span]:
    begin = i = start
    while i < end:
        if text[i] not in _CJK_ENDERS and text[i] not in _LATIN_ENDERS:
            i += 1
            continue
        j = i  # the run of end marks and the closing quotes/brackets that follow them
        while j < end and (text[j] in _CJK_ENDERS or text[j] in _LATIN_ENDERS or text[j] in _CLOSERS):
            j += 1
        if _ends_sentence(text, start, i, j, end) and (span := _strip(text, begin, j)):
            yield span
            begin = j
        i = j
    if span := _strip(text, begin, end):
        yield span


def _ends_sentence(text: str, line_start: int, i: int, j: int, line_end: int) -> bool:
    """Whether the run of marks text[i:j] ends a sentence (see the module docstring)."""
    marks = text[i:j]
    if j == line_end or any(c in _CJK_ENDERS for c in marks):
        return True
    if text[j].isascii() and text[j].isalnum():
        return False
    following = _skip_space(text, j, line_end)
    if following < line_end and text[following].islower():
        return False
    if "".join(c for c in marks if c not in _CLOSERS) != ".":
        return True
    k = i
    while k > line_start and text[k - 1].isascii() and (text[k - 1].isalpha() or text[k - 1] == "."):
        k -= 1
    word = text[k:i]
    if word.lower() in _ABBREVIATIONS or _INITIALISM.fullmatch(word):
        return False
    if len(word) == 1 and word.isupper() and word != "I":
        return False
    k = i
    while k > line_start and text[k - 1].isdigit():
        k -= 1
    return not (k < i and _skip_space(text, line_start, k) == k)  # "1. Buy milk" opens a list


def _fit(text: str, a: int, b: int, ok: Callable[[str], bool]) -> list[Span]:
    """Spans covering [a, b) (minus whitespace at cuts) that each pass ``ok``."""
    return [(a, b)] if ok(text[a:b]) else _split(text, a, b, ok, 0)


def _split(text: str, a: int, b: int, ok: Callable[[str], bool], level: int) -> list[Span]:
    """Split [a, b), known not to fit, at this level's cuts; pieces still too long go one level down."""
    if level == len(_CUTTERS):
        return _hard_split(text, a, b, ok)
    bounds = [a, *_CUTTERS[level](text, a, b), b]
    units = [span for x, y in itertools.pairwise(bounds) if (span := _strip(text, x, y))]
    pieces: list[Span] = []
    i = 0
    while i < len(units):
        start, end = units[i]
        i += 1
        if (start, end) == (a, b) or not ok(text[start:end]):
            pieces += _split(text, start, end, ok, level + 1)
            continue
        while i < len(units) and ok(text[start : units[i][1]]):  # pack neighbours greedily
            end = units[i][1]
            i += 1
        pieces.append((start, end))
    return pieces


def _clause_cuts(text: str, a: int, b: int) -> Iterator[int]:
    """Positions just after clause punctuation (and any closing quotes after it)."""
    for i in range(a, b - 1):
        c = text[i]
        dash = c == "-" and i > a and text[i - 1] == " " and text[i + 1] == " "
        if c not in _CJK_CLAUSE and c not in _LATIN_CLAUSE and not dash:
            continue
        j = i + 1
        while j < b and text[j] in _CLOSERS:
            j += 1
        # ASCII marks only before a space or non-ASCII text: not inside 1,000 or 12:30 or http://
        if j < b and (c in _CJK_CLAUSE or text[j].isspace() or not text[j].isascii()):
            yield j


def _space_cuts(text: str, a: int, b: int) -> Iterator[int]:
    """Positions where a run of whitespace starts."""
    for i in range(a + 1, b):
        if text[i].isspace() and not text[i - 1].isspace():
            yield i


_CUTTERS: tuple[Callable[[str, int, int], Iterator[int]], ...] = (_clause_cuts, _space_cuts)


def _hard_split(text: str, a: int, b: int, ok: Callable[[str], bool]) -> list[Span]:
    """Cut [a, b) into the longest prefixes that fit, only between character clusters."""
    bounds = _cluster_bounds(text, a, b)
    pieces: list[Span] = []
    first = 0  # index in bounds of the shortest candidate end for the piece starting at a
    while a < b:
        lo, hi, best = first, len(bounds) - 1, -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if ok(text[a : bounds[mid]]):
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        if best < 0:
            cluster = text[a : bounds[first]]
            raise ValueError(f"{cluster!r} at character {a} does not fit the model on its own")
        pieces.append((a, bounds[best]))
        a, first = bounds[best], best + 1
    return pieces


def _cluster_bounds(text: str, a: int, b: int) -> list[int]:
    """Positions in (a, b] where a hard split may fall: not inside a character cluster."""
    bounds = []
    flags = 0  # regional indicators in a row before i: they pair up into flags
    for i in range(a, b):
        ch, prev, flag = text[i], text[i - 1] if i else "", "\U0001f1e6" <= text[i] <= "\U0001f1ff"
        joined = (
            unicodedata.category(ch) in ("Mn", "Mc", "Me")  # combining marks, variation selectors
            or "\u200d" in (ch, prev)  # zero-width joiner
            or "\U0001f3fb" <= ch <= "\U0001f3ff"  # emoji skin-tone modifier
            or ("\udc00" <= ch <= "\udfff" and "\ud800" <= prev <= "\udbff")  # surrogate pair
            or (flag and flags % 2 == 1)
        )
        if i > a and not joined:
            bounds.append(i)
        flags = flags + 1 if flag else 0
    return [*bounds, b]


def _strip(text: str, a: int, b: int) -> Span | None:
    """[a, b) without leading and trailing whitespace, or None if nothing is left."""
    a = _skip_space(text, a, b)
    while b > a and text[b - 1].isspace():
        b -= 1
    return (a, b) if a < b else None


def _skip_space(text: str, i: int, end: int) -> int:
    while i < end and text[i].isspace():
        i += 1
    return i
