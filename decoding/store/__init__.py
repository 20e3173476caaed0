"""Pulled models: a catalogue of names, huggingface_hub downloads, a local store of converted bundles.

    store = ModelStore(store_home(os.environ))
    result = pull(find_model("opus-mt-zh-en"), PullOptions(int8=True), store=store,
                  hub=HubSettings.from_environ(os.environ), progress=Progress.for_terminal(sys.stderr))
    load_bundle(result.model.path)

Knows nothing of HTTP serving; ``server/`` calls :func:`model_path` when ``--model`` names a model.
"""

from __future__ import annotations

from ._catalogue import CATALOGUE, CatalogueEntry, ModelRef, find_model, is_model_name
from ._errors import (
    ConversionError,
    DownloadError,
    GatedRepoError,
    HubUnreachableError,
    NoSafetensorsError,
    NotPulledError,
    RepoNotFoundError,
    RevisionNotFoundError,
    StoreError,
    UnknownModelError,
)
from ._hub import HubSettings
from ._progress import Progress, human_bytes
from ._pull import PullOptions, PullResult, model_path, pull
from ._store import ModelStore, PullRecord, StoredModel, StoreKey, store_home

__all__ = [
    "CATALOGUE",
    "CatalogueEntry",
    "ConversionError",
    "DownloadError",
    "GatedRepoError",
    "HubSettings",
    "HubUnreachableError",
    "ModelRef",
    "ModelStore",
    "NoSafetensorsError",
    "NotPulledError",
    "Progress",
    "PullOptions",
    "PullRecord",
    "PullResult",
    "RepoNotFoundError",
    "RevisionNotFoundError",
    "StoreError",
    "StoreKey",
    "StoredModel",
    "UnknownModelError",
    "find_model",
    "human_bytes",
    "is_model_name",
    "model_path",
    "pull",
    "store_home",
]
