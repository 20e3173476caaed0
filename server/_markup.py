"""HTML/XML documents cut into verbatim markup and translatable text, with the standard library's
HTML tokenizer (``html.parser``), so tags come back byte for byte.

A regular expression cannot find where a tag ends (``<a title="x>y">`` closes at the second ``>``,
a comment may hold ``<b>``); ``html.parser`` follows the HTML rules for that. We keep its *positions*,
not its reconstruction: every token's raw source span is copied verbatim, and only the text between
tags is replaced. So attributes, entities in attributes, comments, doctypes, CDATA sections and
processing instructions are untouched by construction.

What is translated: text runs with at least one letter, outside ``<script>``, ``<style>``,
``<code>``, ``<pre>``, ``<kbd>``, ``<samp>``, ``<textarea>`` (code and preformatted text keep their
meaning only unchanged) and not inside an element marked ``translate="no"``. A run's entities are
decoded before translation and the translation is escaped again, so the output stays well formed.
Whitespace around a run is kept where it was.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from html.parser import HTMLParser

UNTRANSLATED = frozenset({"script", "style", "code", "pre", "kbd", "samp", "textarea"})
# Elements that never have an end tag: their start tag opens nothing.
VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
_SPACE = re.compile(r"^(\s*)(.*?)(\s*)$", re.DOTALL)


class Markup:
    """A document as verbatim ``parts`` and translatable runs (``parts[i]`` for i in ``runs``)."""

    def __init__(self, document: str) -> None:
        self.parts: list[str] = []
        self.runs: list[int] = []
        for raw, translatable in _Tokens(document).spans():
            if translatable:
                self._text(raw)
            elif raw:
                self.parts.append(raw)

    def _text(self, raw: str) -> None:
        if not any(ch.isalpha() for ch in html.unescape(raw)):  # "2024", "&nbsp;", "🙂": nothing to say
            self.parts.append(raw)
            return
        match = _SPACE.match(raw)
        assert match is not None  # the pattern matches any string
        lead, core, trail = match.groups()
        self.parts.extend(part for part in (lead, core, trail) if part)
        self.runs.append(len(self.parts) - (2 if trail else 1))

    def texts(self) -> list[str]:
        """The text runs to translate, entities decoded."""
        return [html.unescape(self.parts[index]) for index in self.runs]

    def fill(self, translations: Sequence[str]) -> str:
        """The document with each run replaced by its translation (escaped)."""
        parts = list(self.parts)
        for index, translation in zip(self.runs, translations, strict=True):
            parts[index] = html.escape(translation, quote=False)
        return "".join(parts)


class _Tokens(HTMLParser):
    """Records where each token starts; a token's raw text runs to the next token's start."""

    def __init__(self, document: str) -> None:
        super().__init__(convert_charrefs=True)
        self._document = document
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", document)]
        self._tokens: list[tuple[int, bool]] = []  # (start offset, is translatable text)
        self._open: list[tuple[str, bool]] = []  # open elements: (tag, untranslated here or above)

    def spans(self) -> list[tuple[str, bool]]:
        self.feed(self._document)
        self.close()
        starts = [start for start, _ in self._tokens] + [len(self._document)]
        spans: list[tuple[str, bool]] = []
        covered = 0
        for (start, translatable), end in zip(self._tokens, starts[1:], strict=True):
            if start > covered:  # anything the tokenizer skipped is kept as it was
                spans.append((self._document[covered:start], False))
            if translatable and spans and spans[-1][1]:  # text the tokenizer reported in pieces
                spans[-1] = (spans[-1][0] + self._document[start:end], True)  # ("a ", "<", " b")
            else:
                spans.append((self._document[start:end], translatable))
            covered = end
        if covered < len(self._document):
            spans.append((self._document[covered:], False))
        return spans

    def _offset(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def _mark(self, translatable: bool = False) -> None:
        start = self._offset()
        if self._tokens and self._tokens[-1][0] == start:
            return  # one token reported twice (e.g. a self-closing tag: start + end)
        self._tokens.append((start, translatable))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._mark()
        if tag in VOID:
            return
        inherited = bool(self._open) and self._open[-1][1]
        untranslated = tag in UNTRANSLATED or dict(attrs).get("translate") == "no"
        self._open.append((tag, inherited or untranslated))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._mark()  # <br/>, <x/>: opens nothing

    def handle_endtag(self, tag: str) -> None:
        self._mark()
        for index in range(len(self._open) - 1, -1, -1):  # closes the nearest open element of that
            if self._open[index][0] == tag:  # name and any left open inside it, as browsers do;
                del self._open[index:]  # a stray end tag closes nothing
                break

    def handle_data(self, data: str) -> None:
        self._mark(translatable=not (self._open and self._open[-1][1]))

    def handle_comment(self, data: str) -> None:
        self._mark()

    def handle_decl(self, decl: str) -> None:
        self._mark()

    def handle_pi(self, data: str) -> None:
        self._mark()

    def unknown_decl(self, data: str) -> None:  # <![CDATA[...]]>
        self._mark()
