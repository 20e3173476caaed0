"""``liuyi pull`` and ``liuyi serve --model NAME`` end to end: the real huggingface_hub client
against a fake hub on 127.0.0.1 (tests/_fake_hub.py), the CLI run as a subprocess so exit
statuses, terminals and the absence of tracebacks are the user's."""

from __future__ import annotations

import dataclasses
import json
import os
import pty
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from decoding import load_manifest
from decoding.store import HubSettings, NoSafetensorsError, Progress
from decoding.store._hub import (
    CONVERSION_BOT,
    CONVERSION_TITLE,
    RemoteFile,
    Snapshot,
    download,
    resolve_weights,
)
from tests._fake_hub import FakeHub, FakePullRequest, FakeRepo
from tests._live import ServerProcess, free_port

REPO = "Helsinki-NLP/opus-mt-zh-en"  # what the catalogue name opus-mt-zh-en points to
M2M100_REPO = "facebook/m2m100_418M"  # the catalogue's m2m100-418M


@dataclasses.dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


@dataclasses.dataclass(frozen=True)
class Homes:
    liuyi: Path
    hf: Path

    def env(self, hub: FakeHub, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "LIUYI_"))}
        env.update(HF_ENDPOINT=hub.url, HF_HOME=str(self.hf), LIUYI_HOME=str(self.liuyi))
        env.update(HF_HUB_DISABLE_TELEMETRY="1", **extra)
        return env

    def copy(self, to: Path) -> Homes:
        shutil.copytree(self.liuyi, to / "liuyi", symlinks=True)
        return Homes(liuyi=to / "liuyi", hf=self.hf)  # the download cache is shared read-mostly

    def bundles(self) -> list[Path]:
        return sorted(p for p in (self.liuyi / "models").glob("*/*") if p.is_dir())

    def leftovers(self) -> list[Path]:
        """What is under LIUYI_HOME/models: after a failed pull there must be nothing."""
        return sorted((self.liuyi / "models").rglob("*"))


def liuyi(*args: str, env: dict[str, str], terminal: bool = False) -> Run:
    """``python -m server ARGS``; with ``terminal`` its stderr is a pseudo-terminal."""
    command = [sys.executable, "-m", "server", *args]
    if not terminal:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        return Run(done.returncode, done.stdout, done.stderr)
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.stdout is not None
    stdout = process.stdout.read().decode()
    process.stdout.close()
    return Run(process.wait(timeout=300), stdout, b"".join(chunks).decode(errors="replace"))


def one_error_line(run: Run, code: str) -> str:
    assert run.returncode != 0
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"liuyi: {code}: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def hub(tiny_marian_dir: Path, tiny_m2m100_dir: Path) -> Iterator[FakeHub]:
    with FakeHub() as fake:
        fake.add_checkpoint(
            REPO, tiny_marian_dir, extra={"pytorch_model.bin": b"p" * 4096, "tf_model.h5": b"t"}
        )
        fake.add_checkpoint(M2M100_REPO, tiny_m2m100_dir)
        pickles = {name: (tiny_marian_dir / name).read_bytes() for name in ("config.json", "vocab.json")}
        fake.repos["liuyi-test/pickles-only"] = dataclasses.replace(
            fake.repos[REPO], files={**pickles, "pytorch_model.bin": b"p" * 4096}
        )
        bert = json.dumps({"model_type": "bert", "hidden_size": 8}).encode()
        fake.repos["liuyi-test/not-a-translator"] = dataclasses.replace(
            fake.repos[REPO], files={"config.json": bert, "model.safetensors": b"\0" * 64}
        )
        fake.gated.add("liuyi-test/gated")
        # the first download of the weights is cut halfway: the pull must still succeed
        fake.cut_once.add((REPO, "model.safetensors"))
        yield fake


@pytest.fixture(scope="module")
def pulled(hub: FakeHub, tmp_path_factory: pytest.TempPathFactory) -> tuple[Homes, Run, int]:
    """``liuyi pull opus-mt-zh-en`` on a terminal, into fresh homes: (homes, run, requests before)."""
    root = tmp_path_factory.mktemp("pulled")
    homes = Homes(liuyi=root / "liuyi", hf=root / "hf")
    before = len(hub.requests)
    run = liuyi("pull", "opus-mt-zh-en", env=homes.env(hub), terminal=True)
    assert run.returncode == 0, run.stderr
    return homes, run, before


def test_pull_shows_download_bytes_and_conversion_stages_on_a_terminal(
    pulled: tuple[Homes, Run, int],
) -> None:
    _, run, _ = pulled
    assert f"liuyi: resolving {REPO}@main" in run.stderr
    assert "liuyi: downloading model.safetensors" in run.stderr and "100%" in run.stderr
    assert "liuyi: converting to an ONNX bundle" in run.stderr
    assert "liuyi: checking the bundle (sha256)" in run.stderr
    assert run.stdout.startswith("opus-mt-zh-en: pulled")


def test_pull_fetches_only_what_the_converter_reads_over_plain_http(
    pulled: tuple[Homes, Run, int], hub: FakeHub
) -> None:
    _, _, before = pulled
    requests = hub.requests[before:]
    fetched = {
        r.path.split("/resolve/")[1].split("/", 1)[1]
        for r in requests
        if r.method == "GET" and "/resolve/" in r.path
    }
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "vocab.json",
        "README.md",
    } <= fetched
    assert not fetched & {"pytorch_model.bin", "tf_model.h5"}
    # only the model-info API and resolve URLs: no Xet, no tree listing, nothing else
    assert all(r.path.startswith(f"/api/models/{REPO}") or "/resolve/" in r.path for r in requests)


def test_a_cut_connection_does_not_fail_the_pull(pulled: tuple[Homes, Run, int], hub: FakeHub) -> None:
    _, _, before = pulled
    weights = [
        r for r in hub.requests[before:] if r.method == "GET" and r.path.endswith("/model.safetensors")
    ]
    assert len(weights) == 2  # the cut attempt, then the retry that completed it
    assert (REPO, "model.safetensors") not in hub.cut_once


def test_pulled_bundle_is_stored_by_repo_and_commit_and_verifies(
    pulled: tuple[Homes, Run, int], hub: FakeHub
) -> None:
    homes, run, _ = pulled
    commit = hub.repos[REPO].commit
    bundle = homes.liuyi / "models" / "Helsinki-NLP--opus-mt-zh-en" / commit
    assert homes.bundles() == [bundle]
    assert str(bundle) in run.stdout
    manifest = load_manifest(bundle, verify_checksums=True)
    assert (manifest.name, manifest.direction, manifest.license) == ("opus-mt-zh-en", "zh-en", "cc-by-4.0")
    record = json.loads((bundle / "pulled.json").read_text())
    assert (record["repo"], record["revision"], record["commit"], record["int8"]) == (
        REPO,
        "main",
        commit,
        False,
    )


def test_second_pull_downloads_nothing_and_prints_no_progress_off_a_terminal(
    pulled: tuple[Homes, Run, int], hub: FakeHub
) -> None:
    homes, _, _ = pulled
    before = len(hub.requests)
    run = liuyi("pull", "opus-mt-zh-en", env=homes.env(hub))
    assert run.returncode == 0 and run.stderr == ""
    assert "already pulled, up to date" in run.stdout
    assert [r.path for r in hub.requests[before:]] == [
        f"/api/models/{REPO}"
    ]  # asked which commit; no download


def test_pull_offline_keeps_the_stored_bundle(pulled: tuple[Homes, Run, int], hub: FakeHub) -> None:
    homes, _, _ = pulled
    run = liuyi("pull", "opus-mt-zh-en", env=homes.env(hub, HF_HUB_OFFLINE="1"))
    assert run.returncode == 0, run.stderr
    assert "hub unreachable, not checked for updates" in run.stdout


def test_a_damaged_stored_bundle_is_made_again(
    pulled: tuple[Homes, Run, int], hub: FakeHub, tmp_path: Path
) -> None:
    homes = pulled[0].copy(tmp_path)
    [bundle] = homes.bundles()
    graph = bundle / "encoder.onnx"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, different sha256
    graph.write_bytes(bytes(data))
    listed = liuyi("models", "--local", env=homes.env(hub))
    assert "damaged" in listed.stdout
    run = liuyi("pull", "opus-mt-zh-en", env=homes.env(hub))
    assert run.returncode == 0 and run.stdout.startswith("opus-mt-zh-en: pulled"), run.stderr
    load_manifest(bundle, verify_checksums=True)


def test_int8_is_its_own_bundle_made_from_the_already_downloaded_checkpoint(
    pulled: tuple[Homes, Run, int], hub: FakeHub, tmp_path: Path
) -> None:
    homes = pulled[0].copy(tmp_path)
    before = len(hub.requests)
    run = liuyi("pull", "opus-mt-zh-en", "--int8", env=homes.env(hub))
    assert run.returncode == 0 and run.stdout.startswith("opus-mt-zh-en: pulled"), run.stderr
    assert not [r for r in hub.requests[before:] if r.method == "GET" and "/resolve/" in r.path]
    commit = hub.repos[REPO].commit
    assert [p.name for p in homes.bundles()] == [commit, f"{commit}-int8"]
    manifest = load_manifest(homes.bundles()[1])
    assert (manifest.name, manifest.quantization) == ("opus-mt-zh-en-int8", "int8")


def test_models_local_lists_pulled_bundles_and_rm_removes_them(
    pulled: tuple[Homes, Run, int], hub: FakeHub, tmp_path: Path
) -> None:
    homes = pulled[0].copy(tmp_path)
    commit = hub.repos[REPO].commit
    listed = liuyi("models", "--local", env=homes.env(hub))
    [line] = listed.stdout.splitlines()
    assert line.split("\t")[:5] == ["opus-mt-zh-en", f"{REPO}@main", commit[:12], "fp32", "zh-en"]
    assert liuyi("rm", "opus-mt-zh-en", "--int8", env=homes.env(hub)).returncode == 1  # no int8 bundle
    removed = liuyi("rm", "opus-mt-zh-en", env=homes.env(hub))
    assert removed.returncode == 0 and homes.bundles() == []
    assert liuyi("rm", "opus-mt-zh-en", env=homes.env(hub)).returncode == 1


def test_pull_of_an_m2m100_checkpoint_makes_one_bundle_for_both_directions(
    hub: FakeHub, tmp_path: Path
) -> None:
    homes = Homes(tmp_path / "liuyi", tmp_path / "hf")
    before = len(hub.downloads())
    run = liuyi("pull", "m2m100-418M", env=homes.env(hub))
    assert run.returncode == 0, run.stderr
    assert {"vocab.json", "sentencepiece.bpe.model", "tokenizer_config.json"} <= set(hub.downloads()[before:])
    [bundle] = homes.bundles()
    manifest = load_manifest(bundle, verify_checksums=True)
    assert (manifest.name, manifest.served_directions, manifest.license, manifest.tokenizer.kind) == (
        "m2m100-418M",
        ("zh-en", "en-zh"),
        "mit",
        "m2m100-sentencepiece",
    )
    listed = liuyi("models", "--model", str(bundle), env=homes.env(hub))
    assert listed.stdout.split("\t")[:2] == ["m2m100-418M", "zh-en,en-zh"]  # every direction it serves


def test_pull_list_shows_the_catalogue(hub: FakeHub, tmp_path: Path) -> None:
    run = liuyi("pull", "--list", env=Homes(tmp_path / "l", tmp_path / "h").env(hub))
    names = [line.split("\t")[0] for line in run.stdout.splitlines()[1:]]
    assert run.returncode == 0 and {"opus-mt-zh-en", "opus-mt-en-zh", "nllb-200-distilled-600M"} <= set(names)


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # bound, then released: nothing listens there


@pytest.mark.parametrize(
    ("args", "environment", "code", "says"),
    [
        (["liuyi-test/missing"], {}, "repo_not_found", "liuyi-test/missing was not found"),
        (["opus-mt-zh-en", "--revision", "v9"], {}, "revision_not_found", "no revision 'v9'"),
        (["liuyi-test/gated"], {}, "repo_gated", "set HF_TOKEN"),
        (
            ["liuyi-test/pickles-only"],
            {},
            "no_safetensors",
            "python -m decoding.export liuyi-test/pickles-only",
        ),
        (["opus-mt-zh-en"], {"HF_HUB_OFFLINE": "1"}, "model_not_pulled", "run `liuyi pull opus-mt-zh-en`"),
        (["opus-mt-zh-en"], {"HF_ENDPOINT": "closed"}, "model_not_pulled", "cannot reach http://127.0.0.1:"),
        (
            ["liuyi-test/not-a-translator"],
            {},
            "conversion_failed",
            "converting liuyi-test/not-a-translator failed",
        ),
        (["no-such-model"], {}, "unknown_model", "liuyi pull --list"),
    ],
    ids=[
        "unknown-repo",
        "unknown-revision",
        "gated",
        "no-safetensors",
        "offline",
        "unreachable",
        "unconvertible",
        "bad-name",
    ],
)
def test_failed_pull_is_one_line_and_leaves_nothing_half_written(
    hub: FakeHub, tmp_path: Path, args: list[str], environment: dict[str, str], code: str, says: str
) -> None:
    homes = Homes(liuyi=tmp_path / "liuyi", hf=tmp_path / "hf")
    if environment.get("HF_ENDPOINT") == "closed":
        environment = {"HF_ENDPOINT": _closed_port_url()}
    run = liuyi("pull", *args, env=homes.env(hub, **environment))
    assert says in one_error_line(run, code)
    assert run.returncode == 2 and homes.leftovers() == []


def test_interrupted_download_resumes_from_where_it_stopped(tmp_path: Path) -> None:
    """huggingface_hub reads in 10 MiB chunks and resumes after the last whole chunk it received,
    so the file must be bigger than one chunk for the resume to show as a Range request."""
    weights = os.urandom(24 * 1024 * 1024)
    with FakeHub() as hub:
        hub.repos["liuyi-test/big"] = repo = FakeRepo(files={"model.safetensors": weights})
        commit = repo.commit
        hub.cut_once.add(("liuyi-test/big", "model.safetensors"))
        snapshot = Snapshot(
            repo="liuyi-test/big",
            revision="main",
            commit=commit,
            files=(RemoteFile(name="model.safetensors", size=len(weights)),),
        )
        settings = HubSettings(endpoint=hub.url, cache_dir=tmp_path / "hf")
        checkpoint = download(snapshot, list(snapshot.files), settings, Progress(None))
    assert (checkpoint / "model.safetensors").read_bytes() == weights
    gets = [r for r in hub.requests if r.method == "GET"]
    assert [r.range for r in gets] == [None, f"bytes={10 * 1024 * 1024}-"]


def test_main_with_only_pickles_falls_back_to_the_hubs_safetensors_conversion(tmp_path: Path) -> None:
    pickles = {"config.json": b"{}", "pytorch_model.bin": b"p"}
    converted = FakeRepo(files={**pickles, "model.safetensors": b"s"}, commit="b" * 40)
    forged = FakeRepo(files={**pickles, "model.safetensors": b"x"}, commit="f" * 40)
    repo = FakeRepo(
        files=pickles,
        pull_requests=[
            FakePullRequest(num=3, author=CONVERSION_BOT, title=CONVERSION_TITLE, state=converted),
            FakePullRequest(num=4, author="someone-else", title=CONVERSION_TITLE, state=forged),
        ],
    )
    with FakeHub() as hub:
        hub.repos["liuyi-test/pickles"] = repo
        settings = HubSettings(endpoint=hub.url, cache_dir=tmp_path)
        snapshot, files = resolve_weights("liuyi-test/pickles", None, settings)
        with pytest.raises(NoSafetensorsError, match=r"python -m decoding\.export liuyi-test/pickles"):
            resolve_weights("liuyi-test/pickles", "main", settings)  # a revision asked for is kept
    assert (snapshot.revision, snapshot.commit) == ("refs/pr/3", "b" * 40)
    assert "model.safetensors" in {f.name for f in files} and "pytorch_model.bin" not in {
        f.name for f in files
    }


def test_serve_model_name_serves_the_stored_bundle_without_the_hub(
    pulled: tuple[Homes, Run, int], hub: FakeHub
) -> None:
    homes, _, _ = pulled
    env = homes.env(hub, HF_HUB_OFFLINE="1")
    with ServerProcess(
        **{k: v for k, v in env.items() if k.startswith(("HF_", "LIUYI_"))}, LIUYI_MODELS="opus-mt-zh-en"
    ) as server:
        assert httpx.get(f"{server.url}/readyz").status_code == 200
        response = httpx.post(f"{server.url}/v1/translate", json={"text": "你好，世界。"}, timeout=60)
    assert response.status_code == 200
    assert response.json()["model"] == "opus-mt-zh-en"


def test_serve_model_name_not_pulled_pulls_it_first_when_the_hub_is_there(
    pulled: tuple[Homes, Run, int], hub: FakeHub, tmp_path: Path
) -> None:
    homes = Homes(liuyi=tmp_path / "liuyi", hf=pulled[0].hf)  # empty store, checkpoint already downloaded
    env = {k: v for k, v in homes.env(hub).items() if k.startswith(("HF_", "LIUYI_"))}
    with ServerProcess(**env, LIUYI_MODELS=REPO) as server:  # a hub id works like a catalogue name
        models = httpx.get(f"{server.url}/v1/models").json()["data"]
    assert [(m["id"], m["direction"], m["license"]) for m in models] == [
        ("opus-mt-zh-en", "zh-en", "cc-by-4.0")
    ]
    assert [p.parent.name for p in homes.bundles()] == ["Helsinki-NLP--opus-mt-zh-en"]


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_serve_model_name_not_pulled_while_offline_fails_at_start_naming_the_pull_command(
    hub: FakeHub, tmp_path: Path, how: str
) -> None:
    homes = Homes(liuyi=tmp_path / "liuyi", hf=tmp_path / "hf")
    env = homes.env(hub, HF_HUB_OFFLINE="1", LIUYI_PORT=str(free_port()))
    if how == "flag":
        run = liuyi("serve", "--model", "opus-mt-en-zh", env=env)
    else:
        run = liuyi("serve", env={**env, "LIUYI_MODELS": "opus-mt-en-zh"})
    assert "run `liuyi pull opus-mt-en-zh`" in one_error_line(run, "model_not_pulled")
    assert homes.leftovers() == []
