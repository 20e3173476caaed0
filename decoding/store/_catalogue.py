"""Short names for the checkpoints liuyi knows how to convert, and how any name becomes a hub repo.

``liuyi pull NAME`` accepts a catalogue name (``opus-mt-zh-en``) or any hub id (``org/name``); the
catalogue adds what a user should know before downloading: family, licence, size, who made it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._errors import UnknownModelError

# a hub id: one "/" between an owner and a name, neither starting with "." (so "./x" stays a path)
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


@dataclass(frozen=True, kw_only=True)
class CatalogueEntry:
    name: str  # what users type: `liuyi pull opus-mt-zh-en`
    repo: str  # hub id the checkpoint is downloaded from
    family: str  # converter family: "marian", "nllb" or "m2m100"
    directions: tuple[str, ...]  # e.g. ("zh-en",); an NLLB or M2M100 bundle serves both
    license: str  # SPDX id of the weights' licence (the model card's)
    attribution: str  # who made the weights; shown by `liuyi models`
    approx_bytes: int  # download size of the float32 safetensors, for the user's decision

    @property
    def source_lang(self) -> str | None:
        """The source language when the checkpoint has one direction (the converter needs it)."""
        return self.directions[0].split("-")[0] if len(self.directions) == 1 else None

    @property
    def target_lang(self) -> str | None:
        return self.directions[0].split("-")[1] if len(self.directions) == 1 else None


CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry(
        name="opus-mt-zh-en",
        repo="Helsinki-NLP/opus-mt-zh-en",
        family="marian",
        directions=("zh-en",),
        license="cc-by-4.0",
        attribution="OPUS-MT by the Language Technology Research Group, University of Helsinki",
        approx_bytes=312_000_000,
    ),
    CatalogueEntry(
        name="opus-mt-en-zh",
        repo="Helsinki-NLP/opus-mt-en-zh",
        family="marian",
        directions=("en-zh",),
        license="apache-2.0",
        attribution="OPUS-MT by the Language Technology Research Group, University of Helsinki",
        approx_bytes=312_000_000,
    ),
    CatalogueEntry(
        name="nllb-200-distilled-600M",
        repo="facebook/nllb-200-distilled-600M",
        family="nllb",
        directions=("zh-en", "en-zh"),
        license="cc-by-nc-4.0",
        attribution="No Language Left Behind (NLLB-200) by Meta AI; non-commercial licence",
        approx_bytes=2_460_000_000,
    ),
    CatalogueEntry(
        name="m2m100-418M",
        repo="facebook/m2m100_418M",
        family="m2m100",
        directions=("zh-en", "en-zh"),
        license="mit",
        attribution="M2M100 by Meta AI (Fan et al., Beyond English-Centric Multilingual Machine Translation)",
        approx_bytes=1_940_000_000,
    ),
)


@dataclass(frozen=True, kw_only=True)
class ModelRef:
    """A model name as the user typed it, resolved to the repo it comes from."""

    name: str  # catalogue name, or the hub id itself
    repo: str
    entry: CatalogueEntry | None  # None for a hub id outside the catalogue


def is_model_name(text: str) -> bool:
    """True for a catalogue name or something shaped like a hub id (``org/name``)."""
    return any(entry.name == text for entry in CATALOGUE) or bool(_HUB_ID.fullmatch(text))


def find_model(name: str) -> ModelRef:
    """Resolve a catalogue name or hub id (a hub id of a catalogue repo gets that entry's facts).

    Raises:
        UnknownModelError: ``name`` is neither.
    """
    for entry in CATALOGUE:
        if name in (entry.name, entry.repo):
            return ModelRef(name=entry.name, repo=entry.repo, entry=entry)
    if _HUB_ID.fullmatch(name):
        return ModelRef(name=name, repo=name, entry=None)
    known = ", ".join(entry.name for entry in CATALOGUE)
    raise UnknownModelError(
        f"{name!r} is not a catalogue name ({known}) nor a hub id like org/name; see `liuyi pull --list`"
    )
