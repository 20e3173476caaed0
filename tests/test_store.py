"""The model store's own rules: names, keys, atomic builds (no hub, no conversion)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from decoding.store import (
    CATALOGUE,
    HubSettings,
    ModelStore,
    StoreKey,
    UnknownModelError,
    find_model,
    is_model_name,
)
from decoding.store._store import new_record

KEY = StoreKey(repo="org/model", commit="c" * 40, int8=True)
RECORD = new_record(name="org/model", repo="org/model", revision="main", commit="c" * 40, int8=True)


def test_catalogue_names_and_their_hub_ids_resolve_to_the_same_entry() -> None:
    for entry in CATALOGUE:
        assert find_model(entry.name).entry == find_model(entry.repo).entry == entry
    assert {"opus-mt-zh-en", "opus-mt-en-zh", "nllb-200-distilled-600M", "m2m100-418M"} <= {
        e.name for e in CATALOGUE
    }


def test_the_readme_pull_table_lists_every_catalogue_entry() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    for entry in CATALOGUE:
        assert f"| `{entry.name}` | `{entry.repo}` |" in readme, entry.name


def test_any_hub_id_is_accepted_without_a_catalogue_entry() -> None:
    ref = find_model("someone/opus-mt-tc-big-zh-en")
    assert (ref.repo, ref.entry) == ("someone/opus-mt-tc-big-zh-en", None)


@pytest.mark.parametrize("name", ["opus-mt", "a/b/c", "./org/name", "/abs/dir", ""])
def test_what_is_neither_a_catalogue_name_nor_a_hub_id_is_refused(name: str) -> None:
    with pytest.raises(UnknownModelError, match="liuyi pull --list"):
        find_model(name)
    assert not is_model_name(name)  # so `serve --model` treats it as a directory, as before


def test_store_keys_name_the_repo_and_the_commit_with_precision(tmp_path: Path) -> None:
    path = ModelStore(tmp_path).path_for(KEY)
    assert path == tmp_path / "models" / "org--model" / ("c" * 40 + "-int8")


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    with pytest.raises(RuntimeError), store.building(KEY, RECORD) as partial:
        partial.mkdir()
        (partial / "encoder.onnx").write_bytes(b"half")
        raise RuntimeError("converter died")
    assert list((tmp_path / "models").iterdir()) == []
    assert store.list() == []


def test_partial_builds_of_dead_processes_are_removed_by_the_next_build(tmp_path: Path) -> None:
    process = subprocess.Popen(["true"])
    process.wait()  # reaped: its pid names no process any more
    dead_pid = process.pid
    store = ModelStore(tmp_path)
    abandoned = tmp_path / "models" / "org--model" / f".partial-{'d' * 40}.{dead_pid}.0000"
    abandoned.mkdir(parents=True)
    (abandoned / "decoder.onnx").write_bytes(b"half")
    with pytest.raises(RuntimeError), store.building(KEY, RECORD):
        raise RuntimeError("stop after the clean-up")
    assert not abandoned.exists()


def test_hub_settings_come_from_the_huggingface_variables(tmp_path: Path) -> None:
    hub = HubSettings.from_environ(
        {
            "HF_ENDPOINT": "http://mirror.local/",
            "HF_HOME": str(tmp_path),
            "HF_TOKEN": "t",
            "HF_HUB_OFFLINE": "1",
        }
    )
    assert hub == HubSettings(
        endpoint="http://mirror.local", cache_dir=tmp_path / "hub", token="t", offline=True
    )
    assert HubSettings.from_environ({}) == HubSettings()
