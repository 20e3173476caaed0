"""The container files, checked offline (no registry is reachable, so no image is built here):
hadolint on deploy/Containerfile, deploy/compose.yaml against the Compose specification,
shellcheck on deploy/local-cluster.sh — and the image's exact ENTRYPOINT and HEALTHCHECK
commands run outside a container, with the image's own LIUYI_* environment."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests._cluster import ROOT, SCRIPT
from tests._live import free_port, require_binary

DEPLOY = ROOT / "deploy"
VENV_BIN = Path(sys.executable).parent  # the test dependencies' console scripts live here


def tool(name: str) -> str:
    path = VENV_BIN / name
    if not path.exists():
        pytest.fail(f"{name} is missing: install the test extra (pip install -e '.[test]')")
    return str(path)


def instructions(containerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the last build stage, continuation lines joined."""
    logical: list[str] = []
    pending = ""
    for line in containerfile.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#") and not pending:
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        if (pending + line).strip():
            logical.append((pending + line).strip())
        pending = ""
    last_from = max(i for i, text in enumerate(logical) if text.upper().startswith("FROM "))
    result = []
    for text in logical[last_from:]:
        keyword, _, rest = text.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def image_environment(steps: list[tuple[str, str]], path: str) -> dict[str, str]:
    """The ENV the image sets, its PATH pointing at this machine's liuyi instead of /opt/liuyi."""
    env: dict[str, str] = {}
    for keyword, rest in steps:
        if keyword == "ENV":
            for pair in shlex.split(rest):
                name, _, value = pair.partition("=")
                env[name] = value.replace("$PATH", path)
    env["PATH"] = env["PATH"].replace("/opt/liuyi/bin", str(VENV_BIN))
    return env


def test_containerfile_passes_hadolint() -> None:
    result = subprocess.run(
        [tool("hadolint"), str(DEPLOY / "Containerfile")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_local_cluster_script_passes_shellcheck() -> None:
    result = subprocess.run(
        [require_binary("shellcheck"), str(SCRIPT)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_file_follows_the_compose_specification(tmp_path: Path) -> None:
    def check(path: Path) -> subprocess.CompletedProcess[str]:
        command = [tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    valid = check(DEPLOY / "compose.yaml")
    assert valid.returncode == 0, valid.stdout + valid.stderr
    broken = tmp_path / "compose.yaml"  # the validator does reject a misspelt key
    broken.write_text((DEPLOY / "compose.yaml").read_text().replace("stop_grace_period", "stop_grace"))
    assert check(broken).returncode != 0


def test_compose_renders_the_same_nginx_config_for_its_replicas(tmp_path: Path) -> None:
    """The nginx service rewrites deploy/nginx/liuyi.conf with sed at start; if the file's
    replica or listen lines change, the rewrite must still hit them."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    script = compose["services"]["nginx"]["command"][-1]
    render = script.split(" && exec nginx")[0]
    render = render.replace("/etc/liuyi/liuyi.conf", str(DEPLOY / "nginx" / "liuyi.conf"))
    render = render.replace("/etc/nginx/conf.d/default.conf", str(tmp_path / "default.conf"))
    subprocess.run(["/bin/sh", "-c", render], check=True, timeout=30)
    rendered = (tmp_path / "default.conf").read_text(encoding="utf-8")
    servers = re.findall(r"^\s+server (\S+) max_fails=0;", rendered, flags=re.MULTILINE)
    assert servers == ["replica-1:8000", "replica-2:8000"]
    code = [line.split("#")[0].strip() for line in rendered.splitlines()]
    assert "listen 8080;" in code and "access_log /dev/stdout liuyi;" in code
    assert not [line for line in code if "127.0.0.1:808" in line]
    assert set(compose["services"]) == {"redis", "replica-1", "replica-2", "nginx"}


def test_the_image_entrypoint_and_healthcheck_work_outside_a_container(tmp_path: Path) -> None:
    steps = instructions(DEPLOY / "Containerfile")
    entrypoint = json.loads(next(rest for keyword, rest in steps if keyword == "ENTRYPOINT"))
    healthcheck = next(rest for keyword, rest in steps if keyword == "HEALTHCHECK")
    check_command = json.loads(healthcheck.split(" CMD ", 1)[1])
    stop_signal = next(rest for keyword, rest in steps if keyword == "STOPSIGNAL")
    assert entrypoint == ["liuyi", "serve"] and stop_signal == "SIGTERM"
    assert ("USER", "10001:10001") in steps

    env = {**os.environ, **image_environment(steps, os.environ["PATH"])}
    assert env["LIUYI_HOST"] == "0.0.0.0"
    # the one change: loopback only on this machine (tests reach nothing else), and a free port
    env.update(LIUYI_HOST="127.0.0.1", LIUYI_PORT=str(free_port()), LIUYI_HOME=str(tmp_path))

    def healthy() -> bool:
        return subprocess.run(check_command, env=env, capture_output=True, timeout=10).returncode == 0

    assert not healthy()  # nothing listens yet: the check must fail
    server = subprocess.Popen(entrypoint, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not healthy():
            assert server.poll() is None and time.monotonic() < deadline, "the entrypoint did not come up"
            time.sleep(0.2)  # polling another process's health, as the container runtime does
        url = f"http://127.0.0.1:{env['LIUYI_PORT']}"
        reply = httpx.post(f"{url}/v1/translate", json={"text": "我很好。"}, timeout=30)
        assert reply.json()["translation"] == "I'm very well."
        server.send_signal(signal.SIGTERM)  # what `podman stop` sends (STOPSIGNAL)
        assert server.wait(30) in (0, -signal.SIGTERM)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        assert server.stderr is not None
        server.stderr.close()
    assert not healthy()
