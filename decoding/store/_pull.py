"""``liuyi pull``: a catalogue name or hub id -> a verified bundle in the local store.

    resolve the revision on the hub (one API call) -> stored and intact? done
    -> download the checkpoint files (huggingface_hub, resumable) -> convert beside the store
    -> rename into place -> verify

When the hub cannot be reached, an intact stored bundle of the same repo is used (nothing newer can
be known); without one the pull fails with :class:`NotPulledError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ._catalogue import ModelRef, find_model, is_model_name
from ._errors import ConversionError, HubUnreachableError, NotPulledError
from ._hub import HubSettings, RemoteFile, Snapshot, download, resolve_weights
from ._progress import Progress, human_bytes
from ._store import ModelStore, StoredModel, StoreKey, new_record


@dataclass(frozen=True, kw_only=True)
class PullOptions:
    revision: str | None = None  # branch, tag or commit sha; None = the repo's main branch
    int8: bool = False  # dynamic int8 quantization: ~4x smaller, faster on CPU
    source_lang: str | None = None  # override what the checkpoint's files say ("zh" / "en")
    target_lang: str | None = None
    force: bool = False  # convert again even when an intact bundle is stored


@dataclass(frozen=True, kw_only=True)
class PullResult:
    model: StoredModel
    downloaded: bool  # False: the store already had it
    offline: bool  # the hub could not be asked; the stored bundle may not be the newest


def pull(
    ref: ModelRef, options: PullOptions, *, store: ModelStore, hub: HubSettings, progress: Progress
) -> PullResult:
    """Make sure the bundle for ``ref`` at ``options.revision`` is in ``store``.

    Arguments:
        ref: from :func:`find_model`.
        options: revision, precision, language overrides.
        store: where bundles live.
        hub: endpoint, cache, token, offline mode.
        progress: stage lines and download bytes (silent when not a terminal).

    Returns:
        The stored bundle and whether it had to be made.

    Raises:
        StoreError: a subclass naming what went wrong (see ``_errors``); nothing is left half-written.
    """
    progress.stage(f"resolving {ref.repo}@{options.revision or 'main'} on {hub.where}")
    try:
        snapshot, files = resolve_weights(ref.repo, options.revision, hub)
    except HubUnreachableError as exc:
        stored = store.find(ref.repo, revision=options.revision, int8=options.int8)
        if stored is None or options.force:
            raise not_pulled(ref.name, exc) from exc
        progress.stage(f"{exc.message}; using the stored bundle (not checked for updates)")
        return PullResult(model=stored, downloaded=False, offline=True)
    key = StoreKey(repo=ref.repo, commit=snapshot.commit, int8=options.int8)
    stored = None if options.force else store.get(key)
    if stored is not None:
        progress.stage(f"{ref.name} is up to date ({snapshot.commit[:12]})")
        return PullResult(model=stored, downloaded=False, offline=False)
    if snapshot.revision != (options.revision or "main"):
        progress.stage(f"main has no safetensors; using the Hub's conversion {snapshot.revision}")
    model = _make(ref, snapshot, files, key, options, store, hub, progress)
    return PullResult(model=model, downloaded=True, offline=False)


def model_path(name: str, *, store: ModelStore, hub: HubSettings, progress: Progress) -> Path:
    """What ``serve --model NAME`` loads: a directory as given; a catalogue name or hub id from the
    store (any revision and precision, newest pull first), pulled first when it is not there.

    Raises:
        StoreError: the model is not stored and cannot be pulled (``NotPulledError`` offline).
    """
    if Path(name).is_dir() or not is_model_name(name):
        return Path(name)
    ref = find_model(name)
    stored = store.find(ref.repo)
    if stored is not None:
        return stored.path
    return pull(ref, PullOptions(), store=store, hub=hub, progress=progress).model.path


def not_pulled(name: str, cause: HubUnreachableError) -> NotPulledError:
    return NotPulledError(
        f"{name} is not in the local store and the hub cannot be used ({cause.message}); "
        f"run `liuyi pull {name}` with network access"
    )


def _make(
    ref: ModelRef,
    snapshot: Snapshot,
    files: list[RemoteFile],
    key: StoreKey,
    options: PullOptions,
    store: ModelStore,
    hub: HubSettings,
    progress: Progress,
) -> StoredModel:
    total = sum(f.size or 0 for f in files)
    progress.stage(f"downloading {len(files)} files ({human_bytes(total)}) at {snapshot.commit[:12]}")
    checkpoint = download(snapshot, files, hub, progress)
    record = new_record(
        name=ref.name,
        repo=ref.repo,
        revision=snapshot.revision,
        commit=snapshot.commit,
        int8=options.int8,
    )
    progress.stage("converting to an ONNX bundle" + (" with int8 weights" if options.int8 else ""))
    with store.building(key, record) as partial:
        _convert(ref, checkpoint, partial, options)
        progress.stage("checking the bundle (sha256)")
    stored = store.get(key)
    if stored is None:
        raise ConversionError(f"the bundle converted from {ref.repo}@{snapshot.commit[:12]} does not verify")
    progress.stage(f"{ref.name} ready ({human_bytes(stored.bytes)}) in {stored.path}")
    return stored


def _convert(ref: ModelRef, checkpoint: Path, output_dir: Path, options: PullOptions) -> None:
    from ..export import convert_checkpoint

    entry = ref.entry
    base = entry.name if entry else ref.repo.split("/")[-1]
    try:
        convert_checkpoint(
            checkpoint,
            output_dir,
            int8=options.int8,
            source_lang=options.source_lang or (entry.source_lang if entry else None),
            target_lang=options.target_lang or (entry.target_lang if entry else None),
            name=base + ("-int8" if options.int8 else ""),
            license=entry.license if entry else None,
            attribution=entry.attribution if entry else None,
        )
    except Exception as exc:  # the converter's own message, whatever it raised, as one line
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConversionError(f"converting {ref.repo} failed: {reason}") from exc
