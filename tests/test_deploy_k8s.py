"""deploy/k8s/ checked offline: every manifest against the Kubernetes schemas that
kubernetes-validate bundles (strict: unknown fields are errors), and the facts that tie the
manifests to liuyi — probe routes, shutdown timing, threads per CPU limit, the image's user, which
routes the Ingress exposes."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from starlette.routing import Mount, Route

from server import Settings, create_app
from tests._cluster import ROOT

K8S = ROOT / "deploy" / "k8s"
MANIFESTS = sorted(K8S.glob("*.yaml")) + sorted(K8S.glob("optional/*.yaml"))
# the oldest Kubernetes release still commonly run, and the newest the package knows
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def resource(kind: str, name: str) -> dict[str, Any]:
    for path in K8S.glob("*.yaml"):
        for doc in documents(path):
            if doc["kind"] == kind and doc["metadata"]["name"] == name:
                return doc
    raise LookupError(f"no {kind} {name} in deploy/k8s")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(K8S)))
def test_manifest_is_valid_kubernetes(path: Path, version: str) -> None:
    docs = documents(path)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError


def test_strict_validation_rejects_a_misspelt_field() -> None:
    deployment = copy.deepcopy(resource("Deployment", "liuyi"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readynessProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSIONS[0], strict=True)


def test_pods_are_probed_on_liuyis_health_routes_and_stop_after_draining() -> None:
    config = resource("ConfigMap", "liuyi")["data"]
    pod = resource("Deployment", "liuyi")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    served = {route.path for route in create_app(Settings()).routes if isinstance(route, Route)}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"  # 503 while starting/draining
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"/readyz", "/healthz"} <= served
    assert container["ports"] == [{"name": "http", "containerPort": int(config["LIUYI_PORT"])}]

    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    drain = int(pre_stop[1]) + float(config["LIUYI_SHUTDOWN_GRACE"])
    assert pod["terminationGracePeriodSeconds"] > drain  # liuyi ends its streams before the kill

    cpu_limit = int(container["resources"]["limits"]["cpu"])
    assert int(config["LIUYI_THREADS"]) == cpu_limit - 1  # one core for the event loop
    containerfile = (ROOT / "deploy" / "Containerfile").read_text(encoding="utf-8")
    assert f"USER {pod['securityContext']['runAsUser']}:" in containerfile


def test_service_budget_and_autoscaler_point_at_the_liuyi_pods() -> None:
    deployment = resource("Deployment", "liuyi")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert resource("Service", "liuyi")["spec"]["selector"].items() <= labels.items()
    budget = resource("PodDisruptionBudget", "liuyi")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    target = resource("HorizontalPodAutoscaler", "liuyi")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "liuyi")
    redis_url = resource("ConfigMap", "liuyi")["data"]["LIUYI_REDIS_URL"]
    redis_service = resource("Service", "liuyi-redis")
    port = redis_service["spec"]["ports"][0]["port"]
    assert redis_url == f"redis://{redis_service['metadata']['name']}:{port}/0"


def ingress_routes(path: str) -> bool:
    """Whether the Ingress sends ``path`` to liuyi (Kubernetes Exact / Prefix matching)."""
    for rule in resource("Ingress", "liuyi")["spec"]["rules"]:
        for entry in rule["http"]["paths"]:
            wanted, kind = entry["path"], entry["pathType"]
            if kind == "Exact" and path == wanted:
                return True
            if kind == "Prefix" and (path == wanted or path.startswith(wanted.rstrip("/") + "/")):
                return True
    return False


def test_ingress_exposes_every_api_route_and_the_page_but_not_metrics_or_probes() -> None:
    app = create_app(Settings())
    paths = [route.path for route in app.routes if isinstance(route, Route)]
    paths += [route.path + "/liuyi.js" for route in app.routes if isinstance(route, Mount)]
    internal = {"/metrics", "/healthz", "/readyz"}
    assert internal <= set(paths)
    assert [path for path in paths if path not in internal and not ingress_routes(path)] == []
    assert [path for path in internal if ingress_routes(path)] == []
