"""The loaded bundles, one per translation direction, and how a request picks one.

A multilingual bundle (NLLB) serves several directions: the registry routes each to a view of it
(:meth:`Bundle.for_direction`) that shares its graphs and name, so one scheduler steps them all.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._bundle import Bundle
from ._errors import UnsupportedDirectionError
from ._languages import detect_language, normalize_language


class ModelRegistry:
    """Chooses the bundle for (source, target); the first bundle loaded for a direction wins."""

    def __init__(self, bundles: Iterable[Bundle]) -> None:
        self._by_direction: dict[str, Bundle] = {}
        self._loaded: dict[str, Bundle] = {}  # name -> bundle serving at least one direction
        for bundle in bundles:
            for direction in bundle.manifest.served_directions:
                if direction not in self._by_direction:
                    self._by_direction[direction] = bundle.for_direction(direction)
                    self._loaded.setdefault(bundle.name, bundle)

    @property
    def bundles(self) -> list[Bundle]:
        """The loaded bundles that serve requests, each once (what schedulers and warm-up need)."""
        return list(self._loaded.values())

    @property
    def routes(self) -> list[Bundle]:
        """One bundle per direction served (a multilingual bundle once per direction): what model
        and language listings show."""
        return list(self._by_direction.values())

    @property
    def directions(self) -> list[str]:
        return list(self._by_direction)

    def resolve(self, source: str, target: str | None, text: str) -> Bundle:
        """Pick the bundle for a request. ``source`` may be "auto" (guessed from ``text``); a missing
        ``target`` means "the other language".

        Raises:
            UnsupportedLanguageError: a code liuyi does not know.
            UnsupportedDirectionError: no bundle for the direction.
        """
        src = normalize_language(source)
        tgt = normalize_language(target, allow_auto=False) if target else None
        if src == "auto":
            detection = detect_language(text)
            guess = detection.language
            served = f"{guess}-{tgt or _other(guess)}" in self._by_direction
            # No letters at all (emoji, digits), or a guess no model translates from: "auto" only
            # promises a model that serves the target, so any such model will do (not a 400).
            if detection.confidence == 0 or not served:
                fallback = next(
                    (b for b in self._by_direction.values() if tgt in (None, b.manifest.target_lang)), None
                )
                if fallback is not None:
                    return fallback
            src = guess
        tgt = tgt or _other(src)
        bundle = self._by_direction.get(f"{src}-{tgt}")
        if bundle is None:
            raise UnsupportedDirectionError(src, tgt, self.directions)
        return bundle


def _other(language: str) -> str:
    """The target a missing ``target`` means: the other language of the pair."""
    return "en" if language == "zh" else "zh"
