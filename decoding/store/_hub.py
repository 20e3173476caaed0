"""Fetching a checkpoint from the Hugging Face Hub (or any ``HF_ENDPOINT`` mirror) with huggingface_hub.

Only the files a converter reads are fetched, into huggingface_hub's own cache (``HF_HOME``), so a
second pull of the same commit (``--int8``, or after ``liuyi rm``) downloads nothing. A connection
cut mid-file is resumed by huggingface_hub itself (an HTTP ``Range`` request for the rest).

huggingface_hub reads ``HF_ENDPOINT``/``HF_HOME``/``HF_HUB_OFFLINE`` once, when it is imported;
:class:`HubSettings` reads them when a pull starts and passes them explicitly, so what the caller's
environment says is what happens.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import (
    DownloadError,
    GatedRepoError,
    HubUnreachableError,
    NoSafetensorsError,
    RepoNotFoundError,
    RevisionNotFoundError,
    StoreError,
)
from ._progress import Progress

# everything converters read besides the weights; absent ones are simply skipped
CHECKPOINT_FILES = (
    "config.json",
    "generation_config.json",
    "README.md",  # the model card: licence, languages
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "source.spm",  # Marian
    "target.spm",
    "vocab.json",
    "target_vocab.json",  # Marian with separate vocabularies
    "sentencepiece.bpe.model",  # NLLB / M2M100
)
SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
_TRUE = ("1", "true", "yes", "on")
_COMMIT = re.compile("[0-9a-f]{40}")  # a git commit id, nothing a path could be made of
# the Hub's safetensors conversion bot and the title of its pull requests (as transformers checks them)
CONVERSION_BOT = "SFconvertbot"
CONVERSION_TITLE = "Adding `safetensors` variant of this model"


@dataclass(frozen=True, kw_only=True)
class HubSettings:
    endpoint: str | None = None  # HF_ENDPOINT; None = https://huggingface.co
    cache_dir: Path | None = None  # HF_HUB_CACHE, else $HF_HOME/hub; None = huggingface_hub's default
    token: str | None = None  # HF_TOKEN; None = huggingface_hub's stored token, if any
    offline: bool = False  # HF_HUB_OFFLINE: never touch the network

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> HubSettings:
        cache = environ.get("HF_HUB_CACHE") or (
            str(Path(environ["HF_HOME"]) / "hub") if environ.get("HF_HOME") else None
        )
        return cls(
            endpoint=(environ.get("HF_ENDPOINT") or "").rstrip("/") or None,
            cache_dir=Path(cache).expanduser() if cache else None,
            token=environ.get("HF_TOKEN") or None,
            offline=(environ.get("HF_HUB_OFFLINE") or "").lower() in _TRUE,
        )

    @property
    def where(self) -> str:
        return self.endpoint or "https://huggingface.co"


@dataclass(frozen=True, kw_only=True)
class RemoteFile:
    name: str
    size: int | None  # bytes, when the hub said


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """A repo at one commit: what is in it."""

    repo: str
    revision: str  # as resolved: "main", a tag, "refs/pr/12", a sha
    commit: str  # resolved sha
    files: tuple[RemoteFile, ...]


def resolve(repo: str, revision: str | None, hub: HubSettings) -> Snapshot:
    """Ask the hub which commit ``revision`` (default: the main branch) is and which files it holds.

    Raises:
        HubUnreachableError, RepoNotFoundError, GatedRepoError, RevisionNotFoundError, DownloadError.
    """
    if hub.offline:
        raise HubUnreachableError("HF_HUB_OFFLINE is set")
    from huggingface_hub import HfApi

    with _hub_errors(repo, revision, hub):
        info = HfApi(endpoint=hub.endpoint, token=hub.token).model_info(
            repo, revision=revision, files_metadata=True
        )
    if not info.sha or not _COMMIT.fullmatch(info.sha):  # it becomes a directory name in the store
        raise DownloadError(f"{hub.where} did not say which commit {repo}@{revision or 'main'} is")
    files = tuple(RemoteFile(name=s.rfilename, size=s.size) for s in info.siblings or ())
    return Snapshot(repo=repo, revision=revision or "main", commit=info.sha, files=files)


def resolve_weights(repo: str, revision: str | None, hub: HubSettings) -> tuple[Snapshot, list[RemoteFile]]:
    """:func:`resolve` and :func:`choose_files`; when no revision was asked for and the main branch
    holds only PyTorch pickles, the Hub's own safetensors conversion is used instead: the open pull
    request ``refs/pr/N`` that the Hub's conversion bot opened (what transformers itself loads).

    Raises:
        NoSafetensorsError: neither the revision nor a conversion pull request has safetensors.
        (and the errors of :func:`resolve`)
    """
    snapshot = resolve(repo, revision, hub)
    try:
        return snapshot, choose_files(snapshot)
    except NoSafetensorsError:
        converted = None if revision is not None else _conversion_pull_request(repo, hub)
        if converted is None:
            raise
    snapshot = resolve(repo, converted, hub)
    return snapshot, choose_files(snapshot)


def _conversion_pull_request(repo: str, hub: HubSettings) -> str | None:
    """``refs/pr/N`` of the newest open safetensors conversion by the Hub's bot, if any. Only that
    author is trusted: its weights are the main branch's, re-serialized."""
    from huggingface_hub import HfApi

    try:
        with _hub_errors(repo, None, hub):
            found = [
                d.num
                for d in HfApi(endpoint=hub.endpoint, token=hub.token).get_repo_discussions(
                    repo, author=CONVERSION_BOT, discussion_type="pull_request", discussion_status="open"
                )
                if d.author == CONVERSION_BOT and d.title == CONVERSION_TITLE and d.is_pull_request
            ]
    except (DownloadError, RepoNotFoundError):  # a mirror without the discussions API
        return None
    return f"refs/pr/{max(found)}" if found else None


def choose_files(snapshot: Snapshot) -> list[RemoteFile]:
    """The files to download: checkpoint metadata and tokenizers, and the weights as safetensors.

    Raises:
        NoSafetensorsError: the weights exist only as PyTorch pickles (or not at all).
    """
    by_name = {f.name: f for f in snapshot.files}
    chosen = [by_name[name] for name in CHECKPOINT_FILES if name in by_name]
    if SAFETENSORS in by_name:
        weights = [by_name[SAFETENSORS]]
    else:  # sharded: model-00001-of-00002.safetensors ... plus their index
        weights = [f for f in snapshot.files if "/" not in f.name and f.name.endswith(".safetensors")]
        if weights and SAFETENSORS_INDEX in by_name:
            weights.append(by_name[SAFETENSORS_INDEX])
    if not weights:
        others = [f.name for f in snapshot.files if f.name.endswith((".bin", ".pt", ".h5", ".ckpt"))]
        what = f"only {', '.join(others[:3])}" if others else "no weights"
        raise NoSafetensorsError(
            f"{snapshot.repo} has no model.safetensors ({what}); convert it with torch instead: "
            f"pip install 'liuyi[export]' && python -m decoding.export {snapshot.repo} OUT_DIR "
            "&& liuyi serve --model OUT_DIR"
        )
    return chosen + weights


def download(snapshot: Snapshot, files: list[RemoteFile], hub: HubSettings, progress: Progress) -> Path:
    """Fetch ``files`` of ``snapshot`` (pinned to its commit) and return the local checkpoint directory.

    Raises:
        HubUnreachableError, DownloadError (and the repo errors of :func:`resolve`).
    """
    from huggingface_hub import hf_hub_download

    local: Path | None = None
    for remote in files:
        with _hub_errors(snapshot.repo, snapshot.commit, hub):
            path = hf_hub_download(
                snapshot.repo,
                remote.name,
                revision=snapshot.commit,
                cache_dir=hub.cache_dir,
                endpoint=hub.endpoint,
                token=hub.token,
                tqdm_class=progress.bar_class(remote.name),
            )
        local = Path(str(path)).parent
    if local is None:
        raise DownloadError(f"{snapshot.repo}: nothing to download")
    return local


class _hub_errors:
    """Turn huggingface_hub's and the network's exceptions into one-line :class:`StoreError` s."""

    def __init__(self, repo: str, revision: str | None, hub: HubSettings) -> None:
        self.repo, self.revision, self.hub = repo, revision or "main", hub

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is None or isinstance(exc, StoreError) or not isinstance(exc, Exception):
            return
        raise self.translate(exc) from exc

    def translate(self, exc: Exception) -> StoreError:
        import httpx2
        from huggingface_hub import errors

        where, repo = self.hub.where, self.repo
        if isinstance(exc, errors.GatedRepoError):
            return GatedRepoError(f"{repo} is gated: accept its terms on {where}/{repo}, then set HF_TOKEN")
        if isinstance(exc, errors.RepositoryNotFoundError):
            return RepoNotFoundError(
                f"{repo} was not found on {where} (check the name; a private repo needs HF_TOKEN)"
            )
        if isinstance(exc, errors.RevisionNotFoundError):
            return RevisionNotFoundError(f"{repo} has no revision {self.revision!r} on {where}")
        if isinstance(exc, errors.OfflineModeIsEnabled):
            return HubUnreachableError("HF_HUB_OFFLINE is set")
        if isinstance(exc, httpx2.TransportError | errors.LocalEntryNotFoundError):
            return HubUnreachableError(f"cannot reach {where} ({_first_line(exc)})")
        if isinstance(exc, errors.HfHubHTTPError):
            return DownloadError(f"{where} refused {repo}@{self.revision}: {_first_line(exc)}")
        if isinstance(exc, OSError | ValueError):  # size mismatch after retries, disk full, ...
            return DownloadError(f"downloading {repo}@{self.revision} failed: {_first_line(exc)}")
        return DownloadError(f"downloading {repo}@{self.revision} failed: {type(exc).__name__}: {exc}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()
