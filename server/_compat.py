"""Compatibility APIs (OpenAI, LibreTranslate, DeepL) — routes are added by their modules."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
