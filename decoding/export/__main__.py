"""``python -m decoding.export SRC OUT [--int8]`` (also ``liuyi export``): a checkpoint -> a liuyi bundle.

Torch-free: Marian (shared or separate vocabularies) and M2M100/NLLB checkpoints that ship
``model.safetensors``. A Marian checkpoint with only ``pytorch_model.bin`` goes through
``python -m decoding.export.marian_torch`` (needs the ``[export]`` extra).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._languages import LANGUAGES
from ._common import run_for_cli
from ._dispatch import FAMILIES, convert_checkpoint


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m decoding.export",
        description="Convert a Hugging Face checkpoint directory "
        f"({', '.join(sorted(FAMILIES))}) to a liuyi model bundle, without torch.",
    )
    parser.add_argument(
        "source", type=Path, help="checkpoint directory (config.json, model.safetensors, ...)"
    )
    parser.add_argument("output", type=Path, help="bundle directory to create")
    parser.add_argument(
        "--int8", action="store_true", help="dynamic int8 quantization (smaller, faster on CPU)"
    )
    parser.add_argument("--name", help="bundle name (default: the checkpoint directory's name)")
    parser.add_argument(
        "--source-lang",
        choices=LANGUAGES,
        help="default: from the checkpoint (an NLLB/M2M100 bundle then serves both directions)",
    )
    parser.add_argument("--target-lang", choices=LANGUAGES, help="default: from the checkpoint")
    parser.add_argument("--license", help="license of the weights (default: the model card's)")
    parser.add_argument("--attribution", help="who made the weights, shown by `liuyi models`")
    parser.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_for_cli(
        lambda: convert_checkpoint(
            args.source,
            args.output,
            force=args.force,
            int8=args.int8,
            source_lang=args.source_lang,
            target_lang=args.target_lang,
            name=args.name,
            license=args.license,
            attribution=args.attribution,
        )
    )


if __name__ == "__main__":
    sys.exit(main())
