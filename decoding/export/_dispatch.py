"""One entry point for every family: read ``config.json``'s ``model_type``, call that family's converter."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import m2m100, marian
from ._checkpoint import ConvertOptions, read_checkpoint

Converter = Callable[..., Path]
# model_type -> converter; NLLB-200 and plain M2M100 checkpoints both say "m2m_100".
FAMILIES: dict[str, Converter] = {"marian": marian.convert, "m2m_100": m2m100.convert}


def convert_checkpoint(
    source: Path,
    output_dir: Path,
    *,
    force: bool = False,
    int8: bool = False,
    source_lang: str | None = None,
    target_lang: str | None = None,
    name: str | None = None,
    license: str | None = None,
    attribution: str | None = None,
) -> Path:
    """Convert a Hugging Face checkpoint directory into a bundle, whatever its (supported) family.

    Languages, licence and generation rules come from the checkpoint's own files; the arguments
    override them. No torch, no transformers.

    Arguments:
        source: the checkpoint directory (config.json, model.safetensors, the tokenizer files).
        output_dir: the bundle directory to create.
        force: replace an existing ``output_dir``.
        int8: quantize both graphs (dynamic int8).
        source_lang, target_lang: "zh"/"en" (a single-direction bundle); None: from the checkpoint
            (an NLLB/M2M100 bundle then serves both zh->en and en->zh).
        name, license, attribution: shown by ``liuyi models`` and ``/v1/models``.

    Returns:
        ``output_dir``.

    Raises:
        FileExistsError: ``output_dir`` exists and ``force`` is false.
        FileNotFoundError: not a checkpoint directory, or a file the family needs is missing.
        ValueError: an unsupported family, no safetensors (the message names the torch command),
            unknown languages, or a shape the fused kernels cannot run.
    """
    checkpoint = read_checkpoint(Path(source))
    family = FAMILIES.get(checkpoint.model_type)
    if family is None:
        raise ValueError(
            f"{source}: model_type {checkpoint.model_type!r} is not supported "
            f"(supported: {', '.join(sorted(FAMILIES))})"
        )
    options = ConvertOptions(
        name=name,
        source_lang=source_lang,
        target_lang=target_lang,
        int8=int8,
        license=license,
        attribution=attribution,
    )
    return family(checkpoint.path, Path(output_dir), force=force, options=options)
