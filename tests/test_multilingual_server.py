"""A multilingual bundle (NLLB) on the server: listed once per direction, each direction reachable."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from decoding import Bundle, load_bundle
from decoding.export import convert_checkpoint
from server import Settings
from tests._live import asgi_client


@pytest.fixture(scope="module")
def nllb(tiny_nllb_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    out = convert_checkpoint(tiny_nllb_dir, tmp_path_factory.mktemp("bundles") / "nllb", name="nllb-tiny")
    return load_bundle(out)


@pytest.fixture
async def client(nllb: Bundle) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(Settings(), [nllb]) as client:
        yield client


async def test_models_list_the_bundle_once_per_direction(client: httpx.AsyncClient) -> None:
    models = (await client.get("/v1/models")).json()["data"]
    assert [(m["id"], m["direction"], m["aliases"]) for m in models] == [
        ("nllb-tiny-zh-en", "zh-en", ["liuyi-zh-en"]),
        ("nllb-tiny-en-zh", "en-zh", ["liuyi-en-zh"]),
    ]


async def test_libretranslate_and_deepl_languages_show_both_directions(client: httpx.AsyncClient) -> None:
    languages = (await client.get("/languages")).json()
    assert {(entry["code"], tuple(entry["targets"])) for entry in languages} == {
        ("en", ("zh",)),
        ("zh", ("en",)),
    }
    targets = (await client.get("/v2/languages?type=target")).json()
    assert {entry["language"][:2] for entry in targets} == {"EN", "ZH"}


@pytest.mark.parametrize("direction", ["zh-en", "en-zh"])
async def test_openai_model_id_picks_the_direction(
    client: httpx.AsyncClient, nllb: Bundle, direction: str
) -> None:
    body = {"model": f"nllb-tiny-{direction}", "messages": [{"role": "user", "content": "Hello, world."}]}
    response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    want = nllb.for_direction(direction).translate("Hello, world.").translation
    assert response.json()["choices"][0]["message"]["content"] == want


async def test_same_text_in_two_directions_is_not_served_from_one_cache_entry(
    client: httpx.AsyncClient, nllb: Bundle
) -> None:
    answers = []
    for source, target in (("zh", "en"), ("en", "zh")):
        response = await client.post(
            "/v1/translate", json={"text": "OK 123", "source": source, "target": target}
        )
        assert response.status_code == 200, response.text
        answers.append(response.json()["translation"])
    assert answers == [nllb.for_direction(d).translate("OK 123").translation for d in ("zh-en", "en-zh")]
