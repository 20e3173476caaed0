"""The local bundle store under ``LIUYI_HOME`` (default ``~/.cache/liuyi``).

Layout (one directory per repo, one bundle per resolved commit and precision)::

    $LIUYI_HOME/models/
      Helsinki-NLP--opus-mt-zh-en/
        <commit sha>/                  a bundle: manifest.json, encoder.onnx, ..., plus pulled.json
        <commit sha>-int8/
        .partial-<commit sha>.<pid>.<random>/   being built; renamed into place when complete

A bundle only appears under its final name once it is complete (built beside it, then renamed), so a
reader never sees half a bundle; a failed build removes its partial directory, and partial
directories left by a killed process are removed by the next build in that repo. ``pulled.json``
records where the bundle came from (repo, the revision asked for, the commit it resolved to).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from .._errors import BundleError
from .._manifest_reader import load_manifest

RECORD_NAME = "pulled.json"
_PARTIAL = ".partial-"


def store_home(environ: Mapping[str, str]) -> Path:
    """``LIUYI_HOME`` if set, else ``~/.cache/liuyi``."""
    return Path(environ.get("LIUYI_HOME") or Path.home() / ".cache" / "liuyi").expanduser()


@dataclass(frozen=True, kw_only=True)
class StoreKey:
    """What makes two pulled bundles the same: the repo, the exact commit, the precision."""

    repo: str  # hub id, e.g. "Helsinki-NLP/opus-mt-zh-en"
    commit: str  # the resolved commit sha, never a branch name (branches move)
    int8: bool

    @property
    def repo_dir(self) -> str:
        return self.repo.replace("/", "--")

    @property
    def bundle_dir(self) -> str:
        return self.commit + ("-int8" if self.int8 else "")


@dataclass(frozen=True, kw_only=True)
class PullRecord:
    """``pulled.json``: written last into a bundle being built."""

    name: str  # what the user asked for: catalogue name or hub id
    repo: str
    revision: str  # as asked: "main", a tag, a commit
    commit: str
    int8: bool
    pulled_at: str  # ISO 8601, UTC


@dataclass(frozen=True, kw_only=True)
class StoredModel:
    record: PullRecord
    path: Path
    bytes: int  # on disk, all files
    intact: bool  # manifest valid and every file present (sha256 too when verified)

    @property
    def key(self) -> StoreKey:
        return StoreKey(repo=self.record.repo, commit=self.record.commit, int8=self.record.int8)


class ModelStore:
    """Bundles pulled from the hub, keyed by :class:`StoreKey`."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.root = home / "models"

    def path_for(self, key: StoreKey) -> Path:
        return self.root / key.repo_dir / key.bundle_dir

    def get(self, key: StoreKey, *, verify: bool = True) -> StoredModel | None:
        """The bundle for ``key`` if it is there and intact (sha256 checked when ``verify``)."""
        found = self._read(self.path_for(key), verify=verify)
        return found if found is not None and found.intact else None

    def find(
        self, repo: str, *, revision: str | None = None, int8: bool | None = None, verify: bool = True
    ) -> StoredModel | None:
        """The most recently pulled intact bundle of ``repo`` matching ``revision`` and ``int8``
        (see :meth:`matching`); sha256-checked when ``verify``."""
        for model in self.matching(repo, revision=revision, int8=int8):
            if model.intact and (not verify or self.get(model.key, verify=True) is not None):
                return model
        return None

    def matching(
        self, repo: str, *, revision: str | None = None, int8: bool | None = None
    ) -> list[StoredModel]:
        """Bundles of ``repo`` (intact or not, newest first) pulled by the name ``revision`` or whose
        commit starts with it (None: any), with precision ``int8`` (None: either)."""
        return [
            model
            for model in self.list(repo=repo)
            if (int8 is None or model.record.int8 == int8)
            and (revision is None or _revision_matches(model.record, revision))
        ]

    def list(self, *, repo: str | None = None, verify: bool = False) -> list[StoredModel]:
        """Every bundle in the store (intact or not), newest pull first."""
        repo_dirs = [self.root / repo.replace("/", "--")] if repo else _subdirs(self.root)
        found = [
            model
            for repo_dir in repo_dirs
            for bundle in _subdirs(repo_dir)
            if (model := self._read(bundle, verify=verify)) is not None
        ]
        return sorted(found, key=lambda m: m.record.pulled_at, reverse=True)

    def remove(self, model: StoredModel) -> None:
        shutil.rmtree(model.path)
        with contextlib.suppress(OSError):  # only if now empty
            model.path.parent.rmdir()

    @contextlib.contextmanager
    def building(self, key: StoreKey, record: PullRecord) -> Iterator[Path]:
        """Yield a directory path (not yet created) to build the bundle for ``key`` in; on success
        write ``record`` into it and rename it into place (replacing a damaged bundle), on any
        failure (interrupt included) remove it."""
        repo_dir = self.root / key.repo_dir
        repo_dir.mkdir(parents=True, exist_ok=True)
        _remove_abandoned_partials(repo_dir)
        partial = repo_dir / f"{_PARTIAL}{key.bundle_dir}.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            yield partial
            (partial / RECORD_NAME).write_text(json.dumps(asdict(record), indent=2) + "\n", encoding="utf-8")
            final = self.path_for(key)
            if final.exists():
                shutil.rmtree(final)
            partial.rename(final)
        finally:
            if partial.exists():
                shutil.rmtree(partial, ignore_errors=True)
            with contextlib.suppress(OSError):  # a first pull of a repo that failed leaves no trace
                repo_dir.rmdir()

    def _read(self, path: Path, *, verify: bool) -> StoredModel | None:
        try:
            raw = json.loads((path / RECORD_NAME).read_text(encoding="utf-8"))
            record = PullRecord(**raw)
        except (OSError, ValueError, TypeError):
            return None  # not a pulled bundle (or its record is unreadable): not ours to show
        try:
            load_manifest(path, verify_checksums=verify)
            intact = True
        except BundleError:
            intact = False
        size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
        return StoredModel(record=record, path=path, bytes=size, intact=intact)


def new_record(*, name: str, repo: str, revision: str, commit: str, int8: bool) -> PullRecord:
    return PullRecord(
        name=name,
        repo=repo,
        revision=revision,
        commit=commit,
        int8=int8,
        pulled_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _revision_matches(record: PullRecord, revision: str) -> bool:
    return revision == record.revision or (len(revision) >= 7 and record.commit.startswith(revision))


def _subdirs(path: Path) -> list[Path]:
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def _remove_abandoned_partials(repo_dir: Path) -> None:
    """Partial directories whose building process is gone (killed mid-pull) are garbage."""
    for partial in repo_dir.glob(_PARTIAL + "*"):
        try:
            pid = int(partial.name.split(".")[-2])
        except (IndexError, ValueError):
            continue
        if not _process_alive(pid):
            shutil.rmtree(partial, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
