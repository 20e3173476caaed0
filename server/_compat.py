"""Compatibility APIs, so existing clients work unchanged against liuyi:

    /v1/chat/completions                                  OpenAI          (_openai.py)
    /translate, /detect, /languages, /frontend/settings   LibreTranslate  (_libretranslate.py)
    /v2/translate, /v2/languages, /v2/usage               DeepL           (_deepl.py)

Each renders errors in its own shape through the app's one error handler (``_app.flavour_of``).
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from . import _deepl, _libretranslate, _openai

ROUTES: list[BaseRoute] = [*_openai.ROUTES, *_libretranslate.ROUTES, *_deepl.ROUTES]
