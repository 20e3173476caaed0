"""STAND-IN for the torch-free ``convert_checkpoint`` (issue 9, items 2-3): same signature, but it
delegates to today's torch exporter (:func:`decoding.export.marian.convert`), so it needs the
``[export]`` extra and converts Marian only. ``liuyi pull`` is written against this contract; the
real converter replaces this module when the branches are merged.
"""

from __future__ import annotations

import json
from pathlib import Path

_ALIASES = {"zh": "zh", "zho": "zh", "cmn": "zh", "en": "en", "eng": "en"}


def convert_checkpoint(
    checkpoint_dir: Path,
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
    """Convert a local checkpoint directory into a bundle in ``output_dir``.

    Arguments:
        checkpoint_dir: config.json, generation_config.json, tokenizer files, model.safetensors, README.md.
        output_dir: the bundle directory to create (must not exist unless ``force``).
        force: replace ``output_dir``.
        int8: dynamic int8 quantization.
        source_lang, target_lang: override what the checkpoint's own files say.
        name, license, attribution: manifest fields (defaults from the checkpoint).

    Returns:
        ``output_dir``.

    Raises:
        ValueError: the checkpoint cannot be converted (one-line reason).
    """
    checkpoint_dir = Path(checkpoint_dir)
    config_path = checkpoint_dir / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{checkpoint_dir} has no config.json")
    model_type = json.loads(config_path.read_text(encoding="utf-8")).get("model_type")
    if model_type != "marian":
        raise ValueError(f"model type {model_type!r} cannot be converted yet (Marian only)")
    if not (checkpoint_dir / "model.safetensors").is_file():
        raise ValueError(f"{checkpoint_dir} has no model.safetensors")
    try:
        from .marian import MarianExportOptions, convert
    except ImportError as exc:  # pragma: no cover - the serving install has no torch
        raise ValueError(f"converting needs the [export] extra for now ({exc})") from None
    tokenizer_config = checkpoint_dir / "tokenizer_config.json"
    declared = json.loads(tokenizer_config.read_text(encoding="utf-8")) if tokenizer_config.is_file() else {}
    options = MarianExportOptions(
        name=name,
        source_lang=source_lang or _ALIASES.get(str(declared.get("source_lang"))),
        target_lang=target_lang or _ALIASES.get(str(declared.get("target_lang"))),
        int8=int8,
        license=license,
        attribution=attribution,
    )
    return convert(checkpoint_dir, Path(output_dir), options=options, force=force)
