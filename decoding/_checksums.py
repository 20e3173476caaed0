"""A bundle's files are sha256-checked once, not at every start.

Hashing NLLB-600M's 2.4 GB costs ~1.3 s of every cold start (and a named model was hashed twice:
by the store, then by the loader). After a file matches the manifest, its ``stat`` identity (size,
inode, mtime and ctime in ns) is written to a stamp beside the manifest; a later load hashes only
files whose identity changed. ``ctime`` cannot be set back by a user (``os.utime`` moves it too), so
any write to a file after its check — even one that keeps its size and restores its mtime — makes
it hashed again. What this does not catch is a disk that rots bits under an unchanged inode; a
load with ``verify_checksums`` still hashes everything once the stamp is deleted.

The stamp is a cache: a bundle directory that cannot be written (a read-only mount) is simply
hashed at every load, and a stamp that cannot be read is ignored. Bundles under
:data:`STAMP_FROM_BYTES` are hashed every time (tens of milliseconds): the bundled model inside the
installed package gets no file written beside it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from ._errors import ChecksumMismatchError
from ._manifest import FileEntry, sha256_file

STAMP_NAME = ".liuyi-verified.json"
STAMP_FROM_BYTES = 64 << 20  # ~50 ms of hashing on the slow machines this runs on


def verify_files(bundle_dir: Path, files: Mapping[str, FileEntry]) -> None:
    """Check every listed file's sha256 unless the stamp shows it unchanged since it last matched.

    Raises:
        ChecksumMismatchError: a file's content differs from the manifest's sha256.
    """
    stamped = sum(entry.bytes for entry in files.values()) >= STAMP_FROM_BYTES
    stamp = _read_stamp(bundle_dir) if stamped else {}
    fresh: dict[str, list[object]] = {}
    for name, entry in files.items():
        identity = _identity(bundle_dir / name, entry.sha256)
        if stamp.get(name) != identity and sha256_file(bundle_dir / name) != entry.sha256:
            raise ChecksumMismatchError(bundle_dir, "sha256 differs from the manifest", file=name)
        fresh[name] = identity
    if stamped and fresh != stamp:
        _write_stamp(bundle_dir, fresh)


def _identity(path: Path, sha256: str) -> list[object]:
    info = path.stat()
    return [info.st_size, info.st_ino, info.st_mtime_ns, info.st_ctime_ns, sha256]


def _read_stamp(bundle_dir: Path) -> dict[str, list[object]]:
    try:
        stamp = json.loads((bundle_dir / STAMP_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}


def _write_stamp(bundle_dir: Path, stamp: dict[str, list[object]]) -> None:
    """Write atomically (a half-written stamp is never read); give up quietly where we may not write."""
    temporary = bundle_dir / f"{STAMP_NAME}.{os.getpid()}.tmp"
    try:
        temporary.write_text(json.dumps(stamp), encoding="utf-8")
        os.replace(temporary, bundle_dir / STAMP_NAME)
    except OSError:
        temporary.unlink(missing_ok=True)
