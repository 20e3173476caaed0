"""Several texts in one request, for the compatibility APIs (LibreTranslate ``q`` lists, DeepL
``text`` lists), with optional HTML/XML markup kept in place.

    texts ──► per text: markup split into text runs (html) ── source detected once per text
          ──► every run is one TranslateRequest ──► prepare() + collect(), concurrently
          ──► runs put back between the tags ──► one Translated per text, in order

Deliberate choices:

- The runs share the continuous-batching scheduler like any other requests; at most
  ``max_concurrent_streams`` of one request are in flight, so a long list fills one batch instead of
  overflowing the queue by itself (and answering 429 to its own sender).
- If one run fails, the others are cancelled and the request fails with that run's error: these
  APIs have no way to report a partial result.
- With ``source: auto`` the language is detected on the whole text (tags removed), not per run, so a
  short run like "OK" inside a Chinese page is still translated as Chinese. A text detected to be in
  the target language already comes back unchanged (what LibreTranslate and DeepL do too), instead
  of failing with "no model translates en->en"; so does a text without a single letter ("2024",
  "🙂"). A source *named* equal to the target is still a 400 (most likely a misconfigured client).
- Markup (``_markup.py``): tags, comments and code are copied verbatim; each text run between
  tags is translated on its own (entities decoded first, the result escaped again). A sentence cut
  by inline tags (``我<b>很</b>好``) is therefore translated in pieces: the price of keeping every
  tag where it was without an alignment model.
- Blank items of a list come back as they were (a single blank text is a 400, see :func:`text_list`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from decoding import detect_language, nonblank, normalize_language

from ._error_codes import ErrorCode
from ._errors import BadRequest
from ._markup import Markup
from ._service import TranslateRequest, TranslationService

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Translated:
    text: str
    source: str  # the language translated from: "zh" or "en"
    confidence: float  # 0..1: how sure the detection was (1.0 when the client named the source)


def text_list(body: Mapping[str, Any], name: str) -> tuple[list[str], bool]:
    """The texts of field ``name`` (a string or a list of strings) and whether it was a list.

    Raises:
        BadRequest: missing, not strings, or an empty list.
        EmptyInputError: a single blank string (mapped as any engine error).
    """
    value = body.get(name)
    if value is None:
        raise BadRequest(f"'{name}' is required", code=ErrorCode.MISSING_TEXT, param=name)
    if isinstance(value, str):
        return [nonblank(value, name)], False
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadRequest(f"'{name}' must be a string or a list of strings", param=name)
    if not value:
        raise BadRequest(f"'{name}' is an empty list", code=ErrorCode.EMPTY_TEXT, param=name)
    return list(value), True


async def translate_texts(
    service: TranslationService,
    texts: Sequence[str],
    *,
    source: str,
    target: str,
    markup: bool = False,
) -> list[Translated]:
    """Translate every text of one request.

    Arguments:
        texts: the texts, in the client's order.
        source: a language code or "auto" (detected per text).
        target: a language code.
        markup: the texts are HTML/XML; translate the text between tags only.

    Returns:
        One :class:`Translated` per text, in order.

    Raises:
        DecodingError: an unknown language code (the error handler makes it a 400).
        ApiError: the first failure of any text (the others are cancelled).
    """
    given = normalize_language(source)
    tgt = normalize_language(target, allow_auto=False)
    documents = [Markup(text) if markup else None for text in texts]
    plans: list[tuple[str, float, list[str]]] = []  # (source, confidence, runs to translate)
    for text, document in zip(texts, documents, strict=True):
        runs = document.texts() if document is not None else ([text] if text.strip() else [])
        src, confidence = given, 1.0
        if given == "auto":
            detection = detect_language(" ".join(runs))
            src, confidence = detection.language, detection.confidence
            if src == tgt or confidence == 0:
                runs = []  # already in the target language, or nothing to translate (digits, emoji)
        plans.append((src, confidence, runs))
    limit = asyncio.Semaphore(service.settings.max_concurrent_streams)

    async def one(text: str, src: str) -> str:
        async with limit:
            prepared = await service.prepare(TranslateRequest(text=text, source=src, target=tgt))
            # Cancelled here, the stream's own `finally` stops its translation before the next step.
            done, _ = await prepared.collect()
            return str(done["translation"])

    results = await _all([one(run, src) for src, _, runs in plans for run in runs])
    translated: list[Translated] = []
    position = 0
    for text, document, (src, confidence, runs) in zip(texts, documents, plans, strict=True):
        done = results[position : position + len(runs)]
        position += len(runs)
        if not runs:
            output = text
        elif document is not None:
            output = document.fill(done)
        else:
            output = done[0]
        translated.append(Translated(text=output, source=src, confidence=confidence))
    return translated


async def _all(jobs: Sequence[Awaitable[T]]) -> list[T]:
    """Like ``asyncio.gather``, but the first failure cancels the other jobs (and waits for them)."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
