"""HTML/XML handling of the compatibility APIs: tags come back byte for byte, text between them is
what gets translated (server/_markup.py)."""

from __future__ import annotations

import html
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from server._markup import Markup


def translated(document: str) -> str:
    """Every run replaced by a marker that names it, as a translation would."""
    markup = Markup(document)
    return markup.fill([f"«{text.upper()}»" for text in markup.texts()])


def test_a_greater_than_sign_inside_a_quoted_attribute_does_not_end_the_tag() -> None:
    assert translated('<a title="x>y">你好</a>') == '<a title="x>y">«你好»</a>'
    assert translated("<a title='<b>'>hi</a>") == "<a title='<b>'>«HI»</a>"


def test_code_pre_script_style_and_translate_no_stay_as_they_are() -> None:
    document = (
        "<p>Run <code>ls -la</code> now</p><pre>keep  this\n text</pre><script>var a = '<p>x</p>';</script>"
        '<style>p > b { color: red }</style><div translate="no">Brand <b>Name</b></div><p>after</p>'
    )
    assert translated(document) == (
        "<p>«RUN» <code>ls -la</code> «NOW»</p><pre>keep  this\n text</pre>"
        "<script>var a = '<p>x</p>';</script><style>p > b { color: red }</style>"
        '<div translate="no">Brand <b>Name</b></div><p>«AFTER»</p>'
    )


def test_comments_doctypes_cdata_and_processing_instructions_are_kept() -> None:
    document = '<?xml version="1.0"?><!DOCTYPE x><!-- <b>not a tag</b> --><![CDATA[a < b]]><t>text</t>'
    assert translated(document) == (
        '<?xml version="1.0"?><!DOCTYPE x><!-- <b>not a tag</b> --><![CDATA[a < b]]><t>«TEXT»</t>'
    )


def test_entities_are_decoded_for_translation_and_the_result_escaped() -> None:
    markup = Markup("<p>Tom &amp; Jerry</p><p>&nbsp;&copy; 2024</p>")
    assert markup.texts() == ["Tom & Jerry"]  # the second run has no letter: kept verbatim
    assert markup.fill(["汤姆 & <杰瑞>"]) == "<p>汤姆 &amp; &lt;杰瑞&gt;</p><p>&nbsp;&copy; 2024</p>"


def test_whitespace_around_text_and_unclosed_or_stray_tags_are_kept() -> None:
    assert translated("<ul>\n  <li>one\n  <li>two\n</ul></b>") == "<ul>\n  <li>«ONE»\n  <li>«TWO»\n</ul></b>"
    assert translated("a < b and c") == "«A < B AND C»".replace("<", "&lt;")


# -- properties ------------------------------------------------------------------------------------

names = st.sampled_from(["p", "b", "a", "span", "div", "x-y", "code", "pre", "br", "img", "t"])
attribute_values = st.text(alphabet="ab <>/=&;'\"中文", max_size=8)
words = st.text(alphabet=st.sampled_from(list("ab 中文好。&;#<>\n")), min_size=1, max_size=10)


@st.composite
def start_tag(draw: st.DrawFn) -> str:
    name = draw(names)
    attributes = ""
    for key, value in draw(
        st.dictionaries(st.sampled_from(["title", "href", "data-x", "translate"]), attribute_values)
    ).items():
        quote = '"' if '"' not in value else "'"
        attributes += f" {key}={quote}{value.replace(quote, '')}{quote}"
    return f"<{name}{attributes}{draw(st.sampled_from(['', '/']))}>"


tokens = st.one_of(
    start_tag(),
    names.map(lambda name: f"</{name}>"),
    st.text(alphabet="ab <>中", max_size=6).map(lambda text: f"<!--{text.replace('-', '')}-->"),
    words.map(lambda text: html.escape(text, quote=False)),
)
documents = st.lists(tokens, max_size=12).map("".join)


class _Tags(HTMLParser):
    """Every non-text token's exact source text, in order."""

    def __init__(self, document: str) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.feed(document)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append(self.get_starttag_text() or "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append(self.get_starttag_text() or "")

    def handle_endtag(self, tag: str) -> None:
        self.found.append(f"</{tag}>")

    def handle_comment(self, data: str) -> None:
        self.found.append(f"<!--{data}-->")


@settings(max_examples=300, deadline=None)
@given(documents)
def test_cutting_a_document_loses_and_changes_nothing(document: str) -> None:
    assert "".join(Markup(document).parts) == document


@settings(max_examples=300, deadline=None)
@given(documents, st.sampled_from(["«译文»", "x < y & z", "", "Übersetzung"]))
def test_translating_keeps_every_tag_attribute_and_comment_unchanged(document: str, translation: str) -> None:
    markup = Markup(document)
    output = markup.fill([translation] * len(markup.runs))
    assert _Tags(output).found == _Tags(document).found
