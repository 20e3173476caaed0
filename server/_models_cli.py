"""``liuyi pull``, ``liuyi rm``, ``liuyi models --local`` and model names in ``--model``.

The work is done by :mod:`decoding.store`; this module parses arguments and prints: progress on
stderr when it is a terminal, one result line on stdout, one error line (``liuyi: code: message``)
on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decoding import LANGUAGES

from ._settings import Settings

if TYPE_CHECKING:
    from decoding.store import ModelStore

STORE_COMMANDS = ("pull", "rm")


def add_store_commands(commands: Any) -> None:
    """Add ``pull`` and ``rm`` to the ``liuyi`` sub-command parser."""
    pull = commands.add_parser(
        "pull",
        help="download a model from the Hugging Face Hub and convert it to a bundle",
        description="Download a checkpoint (catalogue name or hub id org/name) with huggingface_hub "
        "and convert it to a bundle in LIUYI_HOME (default ~/.cache/liuyi). Honours HF_ENDPOINT, "
        "HF_HOME, HF_TOKEN and HF_HUB_OFFLINE.",
    )
    pull.add_argument(
        "name", nargs="?", help="catalogue name (see --list) or hub id, e.g. Helsinki-NLP/opus-mt-zh-en"
    )
    pull.add_argument("--list", action="store_true", help="show the catalogue and exit")
    pull.add_argument("--int8", action="store_true", help="int8 weights: ~4x smaller, faster on CPU")
    pull.add_argument("--revision", help="branch, tag or commit (default: main)")
    pull.add_argument("--source", choices=LANGUAGES, help="source language (default: from the checkpoint)")
    pull.add_argument("--target", choices=LANGUAGES, help="target language (default: from the checkpoint)")
    pull.add_argument("--force", action="store_true", help="convert again even if the bundle is stored")

    rm = commands.add_parser("rm", help="remove a pulled bundle from LIUYI_HOME")
    rm.add_argument("name", help="catalogue name or hub id, as pulled")
    rm.add_argument("--int8", action="store_true", help="remove the int8 bundle (default: the float32 one)")
    rm.add_argument("--revision", help="only the bundle pulled at this revision (default: all revisions)")


def run_store_command(args: argparse.Namespace) -> int:
    """Run ``pull``, ``rm`` or ``models --local``; store errors propagate to ``main``'s one line."""
    from decoding.store import ModelStore, store_home

    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)  # its retry warnings: our progress says it
    store = ModelStore(store_home(os.environ))
    if args.command == "rm":
        return _remove(store, args)
    if args.command == "models":
        return _list_local(store)
    if args.list:
        return _list_catalogue(store)
    if not args.name:
        print("liuyi: pull needs a model name (see `liuyi pull --list`)", file=sys.stderr)
        return 2
    return _pull(store, args)


def served_model_paths(paths: Iterable[Path]) -> list[Path]:
    """``--model`` / ``LIUYI_MODELS`` entries as bundle directories: a directory stays as it is, a
    catalogue name or hub id comes from the store (pulled first if missing and the hub is reachable).

    Raises:
        StoreError: a named model cannot be had (``model_not_pulled`` names the `liuyi pull` command).
    """
    from decoding.store import HubSettings, ModelStore, Progress, model_path, store_home

    store, hub = ModelStore(store_home(os.environ)), HubSettings.from_environ(os.environ)
    progress = Progress.for_terminal(sys.stderr)
    return [model_path(str(path), store=store, hub=hub, progress=progress) for path in paths]


def with_served_models(settings: Settings) -> Settings:
    """``settings`` with model names replaced by the stored bundle directories."""
    if not settings.models:
        return settings
    return replace(settings, models=tuple(served_model_paths(settings.models)))


def _pull(store: ModelStore, args: argparse.Namespace) -> int:
    from decoding.store import HubSettings, Progress, PullOptions, find_model, human_bytes, pull

    options = PullOptions(
        revision=args.revision,
        int8=args.int8,
        source_lang=args.source,
        target_lang=args.target,
        force=args.force,
    )
    result = pull(
        find_model(args.name),
        options,
        store=store,
        hub=HubSettings.from_environ(os.environ),
        progress=Progress.for_terminal(sys.stderr),
    )
    model = result.model
    if result.downloaded:
        state = "pulled"
    elif result.offline:
        state = "already pulled (hub unreachable, not checked for updates)"
    else:
        state = "already pulled, up to date"
    print(f"{args.name}: {state} — {human_bytes(model.bytes)} in {model.path}")
    return 0


def _remove(store: ModelStore, args: argparse.Namespace) -> int:
    from decoding.store import find_model

    ref = find_model(args.name)
    doomed = store.matching(ref.repo, revision=args.revision, int8=args.int8)
    if not doomed:
        precision = "int8" if args.int8 else "float32"
        print(
            f"liuyi: no {precision} bundle of {args.name} is pulled (see `liuyi models --local`)",
            file=sys.stderr,
        )
        return 1
    for model in doomed:
        store.remove(model)
        print(f"removed {args.name} {model.record.commit[:12]}{' int8' * model.record.int8} ({model.path})")
    return 0


def _list_local(store: Any) -> int:
    from decoding.store import human_bytes

    models = store.list()
    if not models:
        print(f"no pulled models in {store.root} (try `liuyi pull --list`)", file=sys.stderr)
    for m in models:
        r = m.record
        print(
            f"{r.name}\t{r.repo}@{r.revision}\t{r.commit[:12]}\t{'int8' if r.int8 else 'fp32'}\t"
            f"{_directions(m.path) if m.intact else '-'}\t{human_bytes(m.bytes)}\t"
            f"{'ok' if m.intact else 'damaged (pull again)'}\t{m.path}"
        )
    return 0


def _directions(bundle: Path) -> str:
    """Every direction the bundle serves ("zh-en,en-zh" for NLLB), as the server will route them."""
    from decoding import load_manifest

    return ",".join(load_manifest(bundle, verify_checksums=False).served_directions)


def _list_catalogue(store: Any) -> int:
    from decoding.store import CATALOGUE, human_bytes

    print("NAME\tHUB ID\tFAMILY\tDIRECTIONS\tDOWNLOAD\tLICENCE\tPULLED")
    for e in CATALOGUE:
        pulled = "yes" if store.matching(e.repo) else "-"
        print(
            f"{e.name}\t{e.repo}\t{e.family}\t{','.join(e.directions)}\t~{human_bytes(e.approx_bytes)}\t"
            f"{e.license}\t{pulled}"
        )
    print("any other hub id (org/name) of a supported family works too", file=sys.stderr)
    return 0
