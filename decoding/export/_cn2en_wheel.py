"""Read the cn2en 0.0.118 wheel (or its extracted package): the checkpoint, the two vocabularies and
the licence, each checked against the sha256 the wheel's RECORD lists, so a bundle always holds
exactly 0.0.118. The vocabularies are pickled ``Lang`` objects, read by an unpickler that refuses
any class but ``Lang``: nothing in the pickle runs.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERSION = "0.0.118"
DIST_INFO = f"cn2en-{VERSION}.dist-info"
# sha256 of the files we read, as listed in the wheel's RECORD (converted from base64 to hex)
_EXPECTED_SHA256 = {
    "cn2en/model.pth": "ec6415ab27b1fef85b1e8d7334b5530152061992f9732b61a67dcb649369a6cb",
    "cn2en/input_lang.pkl": "ce0df7c56c3d1f06fc5387227b84988f1c69759fd69a96f9ad38fa78efe97f65",
    "cn2en/output_lang.pkl": "9ec82de5ecb91811b7e400c69136dbe3af24bf25e4cc9db0c29b744ed6830152",
    f"{DIST_INFO}/LICENSE": "d9b9bdb8569b419dd891bfd269253fb946c08f6fa1b5ce96250992ffae6a0f4d",
}


@dataclass(frozen=True)
class WheelFiles:
    """The four files the converter reads, checked."""

    checkpoint: bytes  # model.pth: {"encoder": state dict, "decoder": state dict, ...}
    input_lang: bytes
    output_lang: bytes
    license: str


class _Lang:
    """Stands in for the reference's ``Lang``: pickle fills ``__dict__``, nothing else runs."""

    word2index: dict[str, int]
    index2word: dict[int, str]
    n_words: int


class _LangUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if name == "Lang":
            return _Lang
        raise pickle.UnpicklingError(f"unexpected {module}.{name} in a cn2en vocabulary pickle")


def read_wheel(source: Path) -> WheelFiles:
    """The four files we need, from the wheel or the extracted package, checked against RECORD."""
    data: dict[str, bytes] = {}
    if source.is_file() and source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            names = set(wheel.namelist())
            for name in _EXPECTED_SHA256:
                if name not in names:
                    raise ValueError(f"{source} has no {name}: not the cn2en {VERSION} wheel")
                data[name] = wheel.read(name)
    elif source.is_dir():
        for name in _EXPECTED_SHA256:
            package, _, file = name.partition("/")
            path = source / file if package == "cn2en" else source.parent / name
            if not path.is_file():
                raise ValueError(
                    f"{path} is missing: the source must be the extracted cn2en package "
                    f"directory with {DIST_INFO} next to it, or the wheel"
                )
            data[name] = path.read_bytes()
    else:
        raise ValueError(f"{source} is neither a directory nor a .whl file")
    for name, expected in _EXPECTED_SHA256.items():
        if hashlib.sha256(data[name]).hexdigest() != expected:
            raise ValueError(f"{name} differs from cn2en {VERSION} (sha256 mismatch)")
    return WheelFiles(
        checkpoint=data["cn2en/model.pth"],
        input_lang=data["cn2en/input_lang.pkl"],
        output_lang=data["cn2en/output_lang.pkl"],
        license=data[f"{DIST_INFO}/LICENSE"].decode("utf-8"),
    )


def vocabulary(data: bytes, name: str) -> list[str]:
    """``Lang.index2word`` as a list (position = id), checked against ``word2index``."""
    lang = _LangUnpickler(io.BytesIO(data)).load()
    words = [lang.index2word.get(i) for i in range(lang.n_words)]
    if len(lang.index2word) != lang.n_words or not all(isinstance(w, str) for w in words):
        raise ValueError(f"{name}: index2word does not cover ids 0..{lang.n_words - 1} with words")
    if any(words[index] != word for word, index in lang.word2index.items()):
        raise ValueError(f"{name}: word2index and index2word disagree")
    return [str(w) for w in words]
