"""``python -m decoding.export SRC OUT [--int8]``: a Marian checkpoint -> a liuyi bundle."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import run_for_cli
from .marian import MarianExportOptions, convert


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m decoding.export",
        description="Export a Hugging Face Marian checkpoint (e.g. opus-mt-zh-en) to a liuyi model bundle.",
    )
    parser.add_argument(
        "source",
        help="local checkpoint directory (works offline) or a hub id such as "
        "Helsinki-NLP/opus-mt-zh-en (needs internet)",
    )
    parser.add_argument("output", type=Path, help="bundle directory to create")
    parser.add_argument(
        "--int8", action="store_true", help="dynamic int8 quantization (smaller, faster on CPU)"
    )
    parser.add_argument("--name", help="bundle name (default: from the source)")
    parser.add_argument(
        "--source-lang", choices=["zh", "en"], help="default: parsed from opus-mt-<src>-<tgt>"
    )
    parser.add_argument(
        "--target-lang", choices=["zh", "en"], help="default: parsed from opus-mt-<src>-<tgt>"
    )
    parser.add_argument("--license", help="license of the weights (default: the model card's)")
    parser.add_argument("--attribution", help="who made the weights, shown by `liuyi models`")
    parser.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    options = MarianExportOptions(
        name=args.name,
        source_lang=args.source_lang,
        target_lang=args.target_lang,
        int8=args.int8,
        license=args.license,
        attribution=args.attribution,
    )
    return run_for_cli(lambda: convert(args.source, args.output, options=options, force=args.force))


if __name__ == "__main__":
    sys.exit(main())
