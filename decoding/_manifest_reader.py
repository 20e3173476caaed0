"""Reading ``manifest.json``: JSON -> :class:`~decoding._manifest.Manifest`, every field checked.

A bad manifest fails at load time naming the exact key that is wrong (``decoder.state[0].initial:
...``), and every file the manifest lists is checked against its size and sha256 before anything
opens it (the sha256 once per file version: ``_checksums.py``). Whether the graphs match what
the manifest says is checked later, by ``_graphs.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._checksums import verify_files
from ._errors import BundleFileMissingError, ChecksumMismatchError, ManifestError
from ._languages import LANGUAGES
from ._manifest import (
    FORMAT,
    MANIFEST_NAME,
    DecoderSpec,
    EncoderSpec,
    FileEntry,
    Generation,
    Limits,
    Manifest,
    SourceTensor,
    SpecialTokens,
    StateTensor,
    TokenizerSpec,
)


def load_manifest(bundle_dir: Path, *, verify_checksums: bool = True) -> Manifest:
    """Read and validate ``manifest.json``; check that every listed file exists and matches its sha256.

    Raises:
        BundleFileMissingError: the manifest or a file it lists is not there.
        ManifestError: the JSON is malformed or a field is missing, mistyped or inconsistent.
        ChecksumMismatchError: a file's content differs from the manifest's sha256.
    """
    path = bundle_dir / MANIFEST_NAME
    if not path.is_file():
        raise BundleFileMissingError(bundle_dir, "manifest.json is missing", file=MANIFEST_NAME)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(bundle_dir, f"not valid JSON ({exc})", file=MANIFEST_NAME) from None
    manifest = _Reader(bundle_dir).manifest(raw)
    for name, entry in manifest.files.items():
        file_path = bundle_dir / name
        if not file_path.is_file():
            raise BundleFileMissingError(bundle_dir, "listed in the manifest but missing", file=name)
        if file_path.stat().st_size != entry.bytes:
            raise ChecksumMismatchError(
                bundle_dir, f"size {file_path.stat().st_size} bytes, manifest says {entry.bytes}", file=name
            )
    if verify_checksums:
        verify_files(bundle_dir, manifest.files)
    return manifest


class _Reader:
    """Turns manifest JSON into dataclasses, naming the exact key whenever something is wrong."""

    def __init__(self, bundle_dir: Path) -> None:
        self.bundle_dir = bundle_dir

    def fail(self, key: str, problem: str) -> ManifestError:
        return ManifestError(self.bundle_dir, f"{key}: {problem}", file=MANIFEST_NAME)

    def get(self, obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
        full = f"{where}.{key}" if where else key
        if key not in obj:
            raise self.fail(full, "missing")
        value = obj[key]
        # bool is an int in Python; a manifest saying `true` where a count belongs is still wrong
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(full, f"expected {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            raise self.fail(full, f"expected {_kind_name(kind)}, got {type(value).__name__}")
        return value

    def opt(self, obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if obj.get(key) is None:
            return None
        return self.get(obj, key, kind, where)

    def section(self, obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        return self.get(obj, key, dict, "")  # type: ignore[no-any-return]

    def manifest(self, raw: Any) -> Manifest:
        if not isinstance(raw, dict):
            raise self.fail("(top level)", "expected a JSON object")
        fmt = self.get(raw, "format", str, "")
        if fmt != FORMAT:
            raise self.fail("format", f"{fmt!r} is not supported (this liuyi reads {FORMAT!r})")
        source = self.get(raw, "source_lang", str, "")
        target = self.get(raw, "target_lang", str, "")
        for key, lang in (("source_lang", source), ("target_lang", target)):
            if lang not in LANGUAGES:
                raise self.fail(key, f"{lang!r} is not one of {', '.join(LANGUAGES)}")
        if source == target:
            raise self.fail("target_lang", "must differ from source_lang")
        manifest = Manifest(
            format=fmt,
            name=self.get(raw, "name", str, ""),
            source_lang=source,
            target_lang=target,
            family=self.get(raw, "family", str, ""),
            tokens=self.tokens(self.section(raw, "tokens")),
            limits=self.limits(self.section(raw, "limits")),
            generation=self.generation(self.section(raw, "generation")),
            tokenizer=self.tokenizer(self.section(raw, "tokenizer")),
            encoder=self.encoder(self.section(raw, "encoder")),
            decoder=self.decoder(self.section(raw, "decoder")),
            files=self.files(self.section(raw, "files")),
            license=self.get(raw, "license", str, ""),
            license_file=self.opt(raw, "license_file", str, ""),
            attribution=self.opt(raw, "attribution", str, "") or "",
            quantization=self.opt(raw, "quantization", str, ""),
            activation_scales=self.opt(raw, "activation_scales", str, ""),
            directions=self.directions(raw, f"{source}-{target}"),
        )
        self.check_consistency(manifest)
        return manifest

    def directions(self, raw: Mapping[str, Any], first: str) -> tuple[str, ...]:
        directions = self.opt(raw, "directions", list, "") or []
        for i, direction in enumerate(directions):
            source, _, target = str(direction).partition("-")
            if not isinstance(direction, str) or source not in LANGUAGES or target not in LANGUAGES:
                raise self.fail(f"directions[{i}]", f"{direction!r} is not 'src-tgt' with zh or en")
            if source == target:
                raise self.fail(f"directions[{i}]", "source and target must differ")
        if directions and directions[0] != first:
            raise self.fail("directions", f"must start with source_lang-target_lang ({first!r})")
        if len(set(directions)) != len(directions):
            raise self.fail("directions", "lists a direction twice")
        return tuple(directions)

    def tokens(self, obj: Mapping[str, Any]) -> SpecialTokens:
        return SpecialTokens(
            decoder_start=self.get(obj, "decoder_start", int, "tokens"),
            eos=self.get(obj, "eos", int, "tokens"),
            pad=self.opt(obj, "pad", int, "tokens"),
            unk=self.opt(obj, "unk", int, "tokens"),
        )

    def limits(self, obj: Mapping[str, Any]) -> Limits:
        limits = Limits(
            max_source_tokens=self.get(obj, "max_source_tokens", int, "limits"),
            max_target_tokens=self.get(obj, "max_target_tokens", int, "limits"),
        )
        if limits.max_source_tokens < 2 or limits.max_target_tokens < 1:
            raise self.fail("limits", "max_source_tokens must be >= 2 and max_target_tokens >= 1")
        return limits

    def generation(self, obj: Mapping[str, Any]) -> Generation:
        return Generation(
            forced_eos_at_limit=self.get(obj, "forced_eos_at_limit", bool, "generation"),
            max_new_tokens_ratio=float(self.get(obj, "max_new_tokens_ratio", (int, float), "generation")),
            max_new_tokens_extra=self.get(obj, "max_new_tokens_extra", int, "generation"),
            forced_first_tokens=self.forced_first(obj),
        )

    def forced_first(self, obj: Mapping[str, Any]) -> dict[str, int]:
        forced = self.opt(obj, "forced_first_tokens", dict, "generation") or {}
        for lang, token in forced.items():
            if lang not in LANGUAGES or isinstance(token, bool) or not isinstance(token, int):
                raise self.fail(f"generation.forced_first_tokens.{lang}", "expected zh/en -> a token id")
        return dict(forced)

    def tokenizer(self, obj: Mapping[str, Any]) -> TokenizerSpec:
        files = self.get(obj, "files", dict, "tokenizer")
        for role, name in files.items():
            if not isinstance(name, str):
                raise self.fail(f"tokenizer.files.{role}", "expected a file name")
        return TokenizerSpec(
            kind=self.get(obj, "kind", str, "tokenizer"),
            files=dict(files),
            options=dict(self.opt(obj, "options", dict, "tokenizer") or {}),
        )

    def encoder(self, obj: Mapping[str, Any]) -> EncoderSpec:
        outputs = self.get(obj, "outputs", list, "encoder")
        if not outputs or not all(isinstance(name, str) for name in outputs):
            raise self.fail("encoder.outputs", "expected a non-empty list of output names")
        return EncoderSpec(
            file=self.get(obj, "file", str, "encoder"),
            input_ids=self.get(obj, "input_ids", str, "encoder"),
            attention_mask=self.opt(obj, "attention_mask", str, "encoder"),
            outputs=tuple(outputs),
        )

    def decoder(self, obj: Mapping[str, Any]) -> DecoderSpec:
        sources = [
            SourceTensor(
                name=self.get(item, "name", str, f"decoder.source_tensors[{i}]"),
                batch_axis=self.get(item, "batch_axis", int, f"decoder.source_tensors[{i}]"),
                source_axis=self.opt(item, "source_axis", int, f"decoder.source_tensors[{i}]"),
            )
            for i, item in enumerate(self._objects(obj, "source_tensors", "decoder"))
        ]
        states = [
            StateTensor(
                input=self.get(item, "input", str, f"decoder.state[{i}]"),
                output=self.get(item, "output", str, f"decoder.state[{i}]"),
                batch_axis=self.get(item, "batch_axis", int, f"decoder.state[{i}]"),
                time_axis=self.opt(item, "time_axis", int, f"decoder.state[{i}]"),
                initial=self.get(item, "initial", str, f"decoder.state[{i}]"),
                in_place=bool(self.opt(item, "in_place", bool, f"decoder.state[{i}]")),
            )
            for i, item in enumerate(self._objects(obj, "state", "decoder"))
        ]
        return DecoderSpec(
            file=self.get(obj, "file", str, "decoder"),
            input_ids=self.get(obj, "input_ids", str, "decoder"),
            top_ids=self.get(obj, "top_ids", str, "decoder"),
            logits=self.get(obj, "logits", str, "decoder"),
            position_ids=self.opt(obj, "position_ids", str, "decoder"),
            source_attention_mask=self.opt(obj, "source_attention_mask", str, "decoder"),
            source_tensors=tuple(sources),
            state=tuple(states),
        )

    def _objects(self, obj: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
        items = self.opt(obj, key, list, where) or []
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise self.fail(f"{where}.{key}[{i}]", "expected an object")
        return items

    def files(self, obj: Mapping[str, Any]) -> dict[str, FileEntry]:
        entries = {}
        for name, item in obj.items():
            if not isinstance(item, dict):
                raise self.fail(f"files.{name}", "expected an object with sha256 and bytes")
            digest = self.get(item, "sha256", str, f"files.{name}")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise self.fail(f"files.{name}.sha256", "expected 64 lowercase hex digits")
            if "/" in name or "\\" in name or name.startswith("."):
                raise self.fail(f"files.{name}", "file names must be plain names inside the bundle")
            entries[name] = FileEntry(sha256=digest, bytes=self.get(item, "bytes", int, f"files.{name}"))
        return entries

    def check_consistency(self, m: Manifest) -> None:
        """Cross-field checks: every file the manifest uses must be listed, every state well formed."""
        used = {"encoder.file": m.encoder.file, "decoder.file": m.decoder.file}
        used.update({f"tokenizer.files.{role}": name for role, name in m.tokenizer.files.items()})
        if m.license_file:
            used["license_file"] = m.license_file
        for key, name in used.items():
            if name not in m.files:
                raise self.fail(key, f"{name!r} is not listed in files (so it cannot be checksummed)")
        for i, state in enumerate(m.decoder.state):
            origin, _, output = state.initial.partition(":")
            if state.initial != "empty" and not (origin == "encoder" and output in m.encoder.outputs):
                raise self.fail(
                    f"decoder.state[{i}].initial",
                    f"{state.initial!r} must be 'empty' or 'encoder:<one of encoder.outputs>'",
                )
            if state.time_axis is not None and not (state.in_place and state.initial == "empty"):
                raise self.fail(
                    f"decoder.state[{i}]",
                    "a state with a time_axis must be an in-place cache (in_place: true, initial: 'empty')",
                )
            if state.in_place and (state.time_axis is None or state.batch_axis != 0):
                raise self.fail(f"decoder.state[{i}]", "an in-place cache needs a time_axis and batch_axis 0")
        if any(state.in_place for state in m.decoder.state) and not m.decoder.position_ids:
            raise self.fail("decoder.position_ids", "required by in-place caches (it says where to write)")
        for i, source in enumerate(m.decoder.source_tensors):
            if source.name not in m.encoder.outputs:
                raise self.fail(
                    f"decoder.source_tensors[{i}].name", f"{source.name!r} is not an encoder output"
                )


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "a boolean",
        dict: "an object",
        list: "a list",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)
