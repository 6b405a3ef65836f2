"""deploy/kubernetes, rendered with ``kubectl kustomize`` (the base and the production
overlay) and validated against the Kubernetes schemas by ``kubernetes-validate``; then what
the schemas cannot say: both roles run with probes, resources and the keys from the
Secret, the autoscaler and the disruption budgets select the pods that exist, Prometheus
scrapes every pod, and every setting is a real one with a valid value."""

from __future__ import annotations

import subprocess

import kubernetes_validate
import pytest
import yaml

from service.config import Settings
from tests.deploy.conftest import DEPLOY
from tests.system import require_program

KUBERNETES = DEPLOY / "kubernetes"
VERSION = "1.30.0"


def render(directory) -> list[dict]:
    kubectl = require_program("kubectl", "kubectl")
    done = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module", params=["base", "overlays/production"])
def resources(request) -> list[dict]:
    return render(KUBERNETES / request.param)


def by_kind(resources: list[dict], kind: str) -> dict[str, dict]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


def test_every_resource_is_valid_against_the_kubernetes_schemas(resources):
    assert {r["kind"] for r in resources} >= {
        "ConfigMap",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
    }
    for resource in resources:
        kubernetes_validate.validate(resource, VERSION, strict=True)


def test_a_schema_violation_is_caught():
    deployment = by_kind(render(KUBERNETES / "base"), "Deployment")["lorentztron-api"]
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSION, strict=True)


def test_both_roles_run_probed_sized_and_keyed(resources):
    deployments = by_kind(resources, "Deployment")
    assert set(deployments) == {"lorentztron-api", "lorentztron-learner"}
    settings = {
        key: value
        for config in by_kind(resources, "ConfigMap").values()
        for key, value in config["data"].items()
    }
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]
        assert pod["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        [container] = pod["spec"]["containers"]
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["resources"]["requests"]["cpu"]
        env = {item["name"]: item for item in container["env"]}
        assert env["LORENTZTRON_ROLE"]["value"] == name.rsplit("-", 1)[1]
        for secret in ("LORENTZTRON_REDIS_URL", "LORENTZTRON_WRITE_KEYS"):
            assert env[secret]["valueFrom"]["secretKeyRef"]["name"] == "lorentztron"
        # every setting is a real one, and the settings class accepts the values
        values = {k: v["value"] for k, v in env.items() if "value" in v}
        assert {**settings, **values}.keys() <= {
            f"LORENTZTRON_{field.upper()}" for field in Settings.model_fields
        }
        Settings(
            **{
                key.removeprefix("LORENTZTRON_").lower(): value
                for key, value in {**settings, **values}.items()
            },
            redis_url="redis://redis:6379/0",
        )
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pod["metadata"]["labels"].items()


def test_the_autoscaler_and_the_budgets_select_real_pods(resources):
    deployments = by_kind(resources, "Deployment")
    [autoscaler] = by_kind(resources, "HorizontalPodAutoscaler").values()
    assert autoscaler["spec"]["scaleTargetRef"]["name"] == "lorentztron-api"
    assert autoscaler["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    budgets = by_kind(resources, "PodDisruptionBudget")
    assert set(budgets) == {"lorentztron-api", "lorentztron-learner"}
    for name, budget in budgets.items():
        labels = deployments[name]["spec"]["template"]["metadata"]["labels"]
        assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    [service] = by_kind(resources, "Service").values()
    assert service["spec"]["selector"].items() <= (
        deployments["lorentztron-api"]["spec"]["template"]["metadata"]["labels"].items()
    )


def test_the_production_overlay_runs_on_a_redis_cluster():
    resources = render(KUBERNETES / "overlays" / "production")
    assert all(
        r["metadata"].get("namespace") == "lorentztron"
        for r in resources
        if r["kind"] != "Namespace"
    )
    [settings] = by_kind(resources, "ConfigMap").values()
    assert settings["data"]["LORENTZTRON_REDIS_CLUSTER"] == "true"
    assert settings["data"]["LORENTZTRON_REDIS_WAIT_REPLICAS"] == "1"
    assert by_kind(resources, "Deployment")["lorentztron-learner"]["spec"]["replicas"] == 3
