"""Reading a Hugging Face checkpoint directory without torch or transformers.

Weights come from ``model.safetensors`` (or its shards), memory-mapped (:func:`map_safetensors`);
what the bundle needs besides weights — languages, licence, generation rules — comes from the checkpoint's
own ``config.json``, ``generation_config.json``, ``tokenizer_config.json`` and model card
(``README.md``), with the caller's arguments taking precedence.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._languages import LANGUAGE_TABLE

# What a checkpoint without safetensors can still do: the torch exporter reads pytorch_model.bin.
TORCH_COMMAND = "pip install 'liuyi[export]' && python -m decoding.export.marian_torch {source} OUT"
# Languages liuyi serves, as checkpoints spell them (opus-mt model ids, tokenizer configs, NLLB codes).
LANGUAGE_ALIASES = {
    spelling.lower(): language.code
    for language in LANGUAGE_TABLE
    for spelling in (language.code, *language.checkpoint_spellings, language.nllb_code)
}


@dataclass(frozen=True, kw_only=True)
class ConvertOptions:
    """What the caller may say about a checkpoint; None means "read it from the checkpoint"."""

    name: str | None = None  # bundle name; default: the checkpoint directory's name (+ "-int8")
    source_lang: str | None = None  # "zh" or "en"
    target_lang: str | None = None
    int8: bool = False  # onnxruntime dynamic int8 quantization of both graphs
    license: str | None = None  # default: the model card's "license:" line, else "unknown"
    attribution: str | None = None  # default: "Weights from <checkpoint>; converted by liuyi."


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    config: dict[str, Any]
    generation: dict[str, Any]  # generation_config.json, {} if absent
    tokenizer_config: dict[str, Any]  # tokenizer_config.json, {} if absent
    card: str  # README.md, "" if absent

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))

    def get(self, key: str, default: Any = None) -> Any:
        """A generation setting: generation_config.json first, then config.json (older checkpoints)."""
        if self.generation.get(key) is not None:
            return self.generation[key]
        return self.config.get(key, default)

    def license(self, options: ConvertOptions) -> str:
        match = re.search(r"^license:\s*(\S+)", self.card, re.MULTILINE)
        return options.license or (match.group(1) if match else "unknown")

    @property
    def model_name(self) -> str:
        """The model's name: the repository's inside a Hugging Face cache
        (``models--Helsinki-NLP--opus-mt-zh-en/snapshots/<commit>``), else the directory's."""
        for folder in (self.path, *self.path.parents):
            if folder.name.startswith("models--"):
                return folder.name.split("--")[-1]
        return self.path.name

    @property
    def names(self) -> list[str]:
        """Every name the checkpoint goes by (to parse languages from an opus-mt-<src>-<tgt> name)."""
        recorded = str(self.config.get("_name_or_path") or "").rstrip("/").split("/")[-1]
        return [name for name in (self.model_name, self.path.name, recorded) if name]

    def attribution(self, options: ConvertOptions) -> str:
        return options.attribution or f"Weights from the checkpoint {self.model_name}; converted by liuyi."

    def bundle_name(self, options: ConvertOptions) -> str:
        return options.name or self.model_name + ("-int8" if options.int8 else "")


def read_checkpoint(path: Path) -> Checkpoint:
    """Read a checkpoint directory's JSON files and model card.

    Raises:
        FileNotFoundError: no such directory or no config.json.
        ValueError: config.json is not valid JSON.
    """
    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a checkpoint directory (no config.json)")
    card = path / "README.md"
    return Checkpoint(
        path=path,
        config=_json(path / "config.json"),
        generation=_json(path / "generation_config.json"),
        tokenizer_config=_json(path / "tokenizer_config.json"),
        card=card.read_text(encoding="utf-8", errors="replace") if card.is_file() else "",
    )


def load_weights(checkpoint: Checkpoint, *, torch_command: str = TORCH_COMMAND) -> dict[str, np.ndarray]:
    """All tensors of ``model.safetensors`` (or its shards) as float32/int numpy arrays.

    float32 tensors are read-only views of the memory-mapped file (:func:`map_safetensors`), not
    copies: the converter writes each weight once, so the checkpoint need not fit in memory beside
    the graph being written. Other float types are converted to float32 (copies).

    Raises:
        ValueError: the checkpoint ships no safetensors (the message names the command that works).
    """
    path = checkpoint.path
    index = path / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(_json(index).get("weight_map", {}).values()))
    elif (path / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise ValueError(
            f"{path} has no model.safetensors; the torch-free converter reads only safetensors. "
            f"Convert it with torch instead: {torch_command.format(source=path)}"
        )
    tensors: dict[str, np.ndarray] = {}
    for name in files:
        for key, value in map_safetensors(path / name).items():
            tensors[key] = value.astype(np.float32, copy=False) if value.dtype.kind == "f" else value
    return tensors


# safetensors' dtype names -> numpy's; BF16 (which numpy lacks) is read as its raw 16 bits, then widened
_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def map_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of one ``.safetensors`` file as read-only arrays over the memory-mapped file
    (bfloat16 ones widened to float32 copies).

    Why not ``safetensors.numpy.load_file``: it reads every tensor into memory, so converting
    NLLB-600M held its 2.4 GB of weights (and twice that at the peak) in anonymous memory; a
    mapping is paged in as the converter reads each weight and can be dropped again by the kernel.
    The format is an 8-byte little-endian header size, a JSON header (dtype, shape, byte range of
    each tensor from the end of the header), then the bytes.

    Raises:
        ValueError: not a safetensors file, or a dtype liuyi cannot read.
    """
    with path.open("rb") as stream:
        size = int.from_bytes(stream.read(8), "little")
        try:
            header = json.loads(stream.read(size))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path} is not a safetensors file ({exc})") from None
    start = 8 + size
    data = np.memmap(path, dtype=np.uint8, mode="r")
    tensors: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise ValueError(
                f"{path}: tensor {name} has dtype {entry.get('dtype')!r}, which liuyi cannot read"
            )
        begin, end = entry["data_offsets"]
        array = data[start + begin : start + end].view(np.dtype(dtype).newbyteorder("<"))
        if entry["dtype"] == "BF16":  # the high half of a float32: widen (a copy)
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.reshape(entry["shape"])
    return tensors


def language(code: object) -> str | None:
    """ "zh"/"en" for a checkpoint's spelling of a language, None for anything else."""
    return LANGUAGE_ALIASES.get(str(code).lower()) if code else None


def copy_card(checkpoint: Checkpoint, output_dir: Path) -> list[str]:
    """The model card goes into the bundle (licence terms travel with the weights)."""
    if not checkpoint.card:
        return []
    (output_dir / "MODEL_CARD.md").write_text(checkpoint.card, encoding="utf-8")
    return ["MODEL_CARD.md"]


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc})") from None
    return data if isinstance(data, dict) else {}
