"""Errors of the model store: getting a model from the hub into a local bundle.

Each has a stable ``code`` (scripts may match on it) and a one-line message that says what to do.
They are not :class:`decoding.DecodingError` subclasses: they happen before any model is loaded,
never while a request is served, so the HTTP error table does not need them.

    StoreError                     code
    ├── UnknownModelError          unknown_model
    ├── RepoNotFoundError          repo_not_found
    ├── RevisionNotFoundError      revision_not_found
    ├── GatedRepoError             repo_gated
    ├── NoSafetensorsError         no_safetensors
    ├── HubUnreachableError        hub_unreachable
    │   └── NotPulledError         model_not_pulled
    ├── DownloadError              download_failed
    └── ConversionError            conversion_failed
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class; ``str(error)`` is the one-line message."""

    code = "store_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownModelError(StoreError):
    """Neither a catalogue name, nor a hub id (``org/name``), nor a bundle directory."""

    code = "unknown_model"


class RepoNotFoundError(StoreError):
    code = "repo_not_found"


class RevisionNotFoundError(StoreError):
    code = "revision_not_found"


class GatedRepoError(StoreError):
    """The repo exists but needs an accepted licence and a token (``HF_TOKEN``)."""

    code = "repo_gated"


class NoSafetensorsError(StoreError):
    """The checkpoint ships only PyTorch pickles: only the torch exporter can read those."""

    code = "no_safetensors"


class HubUnreachableError(StoreError):
    """No network, an unreachable ``HF_ENDPOINT``, or ``HF_HUB_OFFLINE=1``."""

    code = "hub_unreachable"


class NotPulledError(HubUnreachableError):
    """The hub cannot be reached and the model is not in the local store."""

    code = "model_not_pulled"


class DownloadError(StoreError):
    """The hub answered, but a file could not be fetched intact."""

    code = "download_failed"


class ConversionError(StoreError):
    """The checkpoint was downloaded but could not be turned into a bundle."""

    code = "conversion_failed"
