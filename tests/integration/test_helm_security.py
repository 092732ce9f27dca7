"""The chart's security (issue 27) and day-one cluster fit (issue 26), rendered offline.

Spark Connect authenticated with a token from a Secret and fenced by NetworkPolicies (one per
service, evaluated here as a CNI would for every pair of the release's pods); every
secret-bearing config key refused under ``config`` with a message naming the Secret path to
use, and delivered from Secrets instead; Strimzi's two Secrets and OAUTHBEARER; the default
PVC on the cluster's default storage class; ``s3://`` through Spark Connect only with an
S3A-capable server. Every scenario here is also rendered for both Kubernetes versions and
validated strictly (kubernetes-validate) by test_helm_chart.py, which parametrizes over
``ci/*-values.yaml``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_helm_chart import (
    HUDI_SINK,
    KUBE_VERSIONS,
    Doc,
    by_kind,
    component,
    containers,
    deployment,
    helm_template,
    mounted_files,
    pod_spec,
    render,
    sink_config_text,
    workloads,
)

SINK_SERVICES = ("coordinator", "participant", "deleter")


def _env(container: Doc) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _render_values(tmp_path: Path, values: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))
    return helm_template("-f", str(file), *extra, check=False)


# --- NetworkPolicies, evaluated ------------------------------------------------------------

def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return set(selector.get("matchLabels", {}).items()) <= set(labels.items()) and not selector.get(
        "matchExpressions")


def _peer_matches(peer: dict[str, Any], labels: dict[str, str]) -> bool:
    """A peer naming pods of this namespace (a namespaceSelector means other namespaces here:
    the release's pods are all in one)."""
    return "namespaceSelector" not in peer and "ipBlock" not in peer and _selects(peer["podSelector"], labels)


def _port_allowed(rule: dict[str, Any], port: int) -> bool:
    return "ports" not in rule or any(p.get("port") == port for p in rule["ports"])


def allowed(docs: list[Doc], source: Doc, target: Doc, port: int) -> bool:
    """Whether a connection from ``source``'s pods to ``target``'s on ``port`` passes both
    sides' NetworkPolicies (a pod no policy selects is open, as in Kubernetes)."""
    src = source["spec"]["template"]["metadata"]["labels"]
    dst = target["spec"]["template"]["metadata"]["labels"]
    policies = by_kind(docs, "NetworkPolicy")

    def governing(labels: dict[str, str], kind: str) -> list[Doc]:
        return [p for p in policies
                if _selects(p["spec"]["podSelector"], labels) and kind in p["spec"]["policyTypes"]]

    def passes(rules: list[dict[str, Any]], peers: str, other: dict[str, str]) -> bool:
        return any(_port_allowed(rule, port)
                   and (peers not in rule or any(_peer_matches(peer, other) for peer in rule[peers]))
                   for rule in rules)

    out, into = governing(src, "Egress"), governing(dst, "Ingress")
    egress_ok = not out or passes([r for p in out for r in p["spec"].get("egress", [])], "to", dst)
    ingress_ok = not into or passes([r for p in into for r in p["spec"].get("ingress", [])], "from", src)
    return egress_ok and ingress_ok


def test_spark_connect_needs_the_token_and_only_participants_reach_it() -> None:
    docs = render("spark-connect")
    server = deployment(docs, "spark-connect")
    (server_container,) = containers(server)
    secret_ref = {"secretKeyRef": {"name": "rel-hudi-sink-spark-connect", "key": "token"}}
    server_env = _env(server_container)
    assert server_env["SPARK_CONNECT_TOKEN_FROM_SECRET"] == secret_ref
    # The server's command hands the token over as SPARK_CONNECT_AUTHENTICATE_TOKEN
    # (spark.connect.authenticate.token) without a Secret's trailing newline: run it, with
    # spark-submit replaced by a printout of what it would get.
    shell, flag, script, name = server_container["command"][2:]
    ran = subprocess.run([shell, flag, script.replace("/opt/spark/bin/spark-submit", "/usr/bin/env"), name],
                         env={"PATH": "/usr/bin:/bin", "SPARK_CONNECT_TOKEN_FROM_SECRET": "t0ken\n"},
                         capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert "SPARK_CONNECT_AUTHENTICATE_TOKEN=t0ken" in ran.stdout.splitlines()
    assert "SPARK_CONNECT_TOKEN_FROM_SECRET" not in ran.stdout
    assert server_env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    args = server_container["args"]
    assert "spark.connect.grpc.binding.address=$(POD_IP)" in args  # not every interface
    assert not any("token" in a or "authenticate" in a for a in args)  # never in the pod spec
    # Participants send the same Secret's token; the ConfigMap's URL carries none.
    config = yaml.safe_load(sink_config_text(docs))
    assert config["spark"]["master"] == "sc://rel-hudi-sink-spark-connect:15002"
    assert "connect_token" not in config["spark"]
    for name in SINK_SERVICES:
        (container,) = containers(deployment(docs, name))
        token = _env(container).get("HUDI_SINK__SPARK__CONNECT_TOKEN")
        assert token == (secret_ref if name == "participant" else None), name

    # One NetworkPolicy per service, each selecting exactly its own pods.
    pods = {component(w): w for w in workloads(docs)}
    policies = by_kind(docs, "NetworkPolicy")
    assert sorted(component(p) for p in policies) == sorted(pods)
    for policy in policies:
        selected = [n for n, w in pods.items()
                    if _selects(policy["spec"]["podSelector"], w["spec"]["template"]["metadata"]["labels"])]
        assert selected == [component(policy)]
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    # Among the release's pods: only participants -> Spark Connect, and nothing reaches an
    # admin port (helm test's pod and adminFrom peers do, below).
    for source in pods:
        for target in pods:
            if source == target:
                continue
            port = 15002 if target == "spark-connect" else 8080
            expected = (source, target) == ("participant", "spark-connect")
            assert allowed(docs, pods[source], pods[target], port) is expected, (source, target)
    # The server opens nothing but DNS (no Kafka, no admin ports, no outside address).
    (server_policy,) = [p for p in policies if component(p) == "spark-connect"]
    assert [sorted(r["ports"], key=str) for r in server_policy["spec"]["egress"]] == [
        [{"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]]


def test_admin_ports_open_to_helm_test_and_admin_from_only() -> None:
    docs = render("secrets")  # adminFrom: the monitoring namespace
    (test_pod,) = by_kind(docs, "Pod")
    tester = {"spec": {"template": {"metadata": {"labels": test_pod["metadata"]["labels"]}}}}
    for name in SINK_SERVICES:
        target = deployment(docs, name)
        assert allowed(docs, tester, target, 8080)
        assert not allowed(docs, tester, target, 9999)
        (policy,) = [p for p in by_kind(docs, "NetworkPolicy") if component(p) == name]
        peers = policy["spec"]["ingress"][0]["from"]
        assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}} in peers


def test_egress_follows_the_config_kafka_ports_registry_and_object_store(tmp_path: Path) -> None:
    docs = render("secrets")
    egress = {component(p): p["spec"]["egress"] for p in by_kind(docs, "NetworkPolicy")}
    ports = {name: sorted({port["port"] for rule in rules for port in rule["ports"]})
             for name, rules in egress.items()}
    assert ports == {"coordinator": [53, 9092], "deleter": [53, 9092], "participant": [53, 8081, 9092]}
    strimzi = {component(p): p["spec"]["egress"] for p in by_kind(render("strimzi"), "NetworkPolicy")}
    kafka_rule = strimzi["participant"][1]
    assert kafka_rule["ports"] == [{"port": 9093, "protocol": "TCP"}]
    assert kafka_rule["to"][0]["podSelector"]["matchLabels"]["strimzi.io/cluster"] == "my-cluster"
    s3 = _render_values(tmp_path, {"persistence": {"enabled": False},
                                   "config": {"table": {"base_path": "s3://lake/orders"}}})
    assert s3.returncode == 0, s3.stderr
    for policy in by_kind([d for d in yaml.safe_load_all(s3.stdout) if d], "NetworkPolicy"):
        assert {"port": 443, "protocol": "TCP"} in [p for r in policy["spec"]["egress"] for p in r["ports"]]


# --- secrets never in the ConfigMap ----------------------------------------------------------

@pytest.mark.parametrize(("config", "message"), [
    ({"avro": {"registry_password": "pw"}}, 'secretConfig."avro.registry_password"'),
    ({"avro": {"registry_url": "https://sink:pw@registry:8081"}}, 'secretConfig."avro.registry_password"'),
    ({"table": {"storage_options": {"aws_secret_access_key": "k"}}},
     'secretConfig."table.storage_options.aws_secret_access_key"'),
    ({"table": {"storage_options": {"aws_session_token": "t"}}}, "objectStore.existingSecret"),
    ({"table": {"storage_options": {"azure_storage_account_key": "k"}}},
     'secretConfig."table.storage_options.azure_storage_account_key"'),
    ({"table": {"storage_options": {"azure_storage_sas_key": "sv=…&sig=…"}}},
     'secretConfig."table.storage_options.azure_storage_sas_key"'),
    ({"table": {"storage_options": {"google_service_account_key": "{…}"}}},
     'secretConfig."table.storage_options.google_service_account_key"'),
    ({"spark": {"conf": {"spark.hadoop.fs.s3a.secret.key": "k"}}},
     'secretConfig."spark.conf.spark.hadoop.fs.s3a.secret.key"'),
    ({"spark": {"conf": {"spark.hadoop.fs.s3a.encryption.key": "k"}}},
     "HUDI_SINK__SPARK__CONF__spark.hadoop.fs.s3a.encryption.key"),
    ({"spark": {"conf": {"spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "k"}}},
     'secretConfig."spark.conf.spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net"'),
    ({"spark": {"conf": {"spark.hadoop.fs.s3a.session.token": "t"}}}, "secretConfig."),
    ({"spark": {"master": "sc://spark:15002/;token=abc"}}, "secretConfig.\"spark.master\""),
    ({"spark": {"connect_token": "abc"}}, "sparkConnect.auth.existingSecret"),
    ({"kafka": {"control_signing_key": "0123456789abcdef"}}, "kafka.controlSigning.existingSecret"),
])
def test_a_secret_in_config_is_refused_naming_the_secret_to_use(config: dict[str, Any], message: str,
                                                                tmp_path: Path) -> None:
    result = _render_values(tmp_path, {"config": config})
    assert result.returncode != 0, f"{config} rendered"
    assert "would be written into the ConfigMap" in result.stderr and message in result.stderr, result.stderr


@pytest.mark.parametrize("config", [
    {"table": {"storage_options": {"aws_access_key_id": "AKIA…", "aws_skip_signature": "true",
                                   "google_application_credentials": "/var/run/gcp/key.json",
                                   "aws_region": "eu-west-1"}}},
    {"spark": {"conf": {"spark.hadoop.fs.s3a.aws.credentials.provider": "com.amazonaws.auth.X",
                        "spark.hadoop.fs.azure.sas.token.provider.type": "org.example.Provider",
                        "spark.hadoop.fs.s3a.encryption.algorithm": "SSE-C"}}},
])
def test_settings_that_only_name_a_secret_render(config: dict[str, Any], tmp_path: Path) -> None:
    result = _render_values(tmp_path, {"config": config})
    assert result.returncode == 0, result.stderr


def _config_check(config_text: str, env: dict[str, str], tmp_path: Path) -> dict[str, Any]:
    """`hudi-sink config check --json` on a rendered config with (only) this environment."""
    from hudi_sink.shared.config.settings import KafkaConfig

    config = yaml.safe_load(config_text)
    if "control_signing_key_file" not in KafkaConfig.model_fields:
        config["kafka"].pop("control_signing_key_file", None)  # helper 'signing' adds it to the product
    config_file = tmp_path / "sink.yaml"
    config_file.write_text(mounted_files(yaml.safe_dump(config), tmp_path / "etc"))
    result = subprocess.run([HUDI_SINK, "config", "check", "--config", str(config_file), "--json"],
                            capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", **env})
    assert result.returncode == 0, result.stderr
    assert "made-up" not in result.stdout
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_secret_config_reaches_every_service_from_its_secret(tmp_path: Path) -> None:
    docs = render("secrets")
    text = sink_config_text(docs)
    assert "registry_password" not in text and "fs.s3a" not in text
    expected = {
        "HUDI_SINK__AVRO__REGISTRY_PASSWORD": {"name": "schema-registry", "key": "password"},
        "HUDI_SINK__SPARK__CONF__spark.hadoop.fs.s3a.secret.key": {"name": "orders-s3a", "key": "secret-key"},
    }
    for name in SINK_SERVICES:
        (container,) = containers(deployment(docs, name))
        env = _env(container)
        for variable, ref in expected.items():
            assert env[variable] == {"secretKeyRef": ref}, (name, variable)
        volumes = {v["name"]: v for v in pod_spec(deployment(docs, name))["volumes"]}
        assert volumes["control-signing"]["secret"]["secretName"] == "orders-control-signing"
    assert yaml.safe_load(text)["kafka"]["control_signing_key_file"] == "/etc/hudi-sink/control-signing/key"
    # The loader takes them from the environment: what the pod's env sets is what the sink runs with.
    report = _config_check(text, {variable: "made-up" for variable in expected}, tmp_path)
    assert report["sources"]["avro.registry_password"] == "env"
    assert report["config"]["avro"]["registry_password"] == "<redacted>"
    assert report["sources"]["spark.conf.spark.hadoop.fs.s3a.secret.key"] == "env"
    assert report["config"]["spark"]["conf"]["spark.hadoop.fs.s3a.secret.key"] == "<redacted>"
    # An object-store key the same way.
    s3 = _render_values(tmp_path, {"persistence": {"enabled": False}, "secretConfig": {
        "table.storage_options.aws_secret_access_key": {"secretName": "orders-s3", "secretKey": "secret"}},
        "config": {"table": {"base_path": "s3://lake/orders",
                             "storage_options": {"aws_region": "eu-west-1"}}}})
    assert s3.returncode == 0, s3.stderr
    s3_docs = [d for d in yaml.safe_load_all(s3.stdout) if d]
    (container,) = containers(deployment(s3_docs, "deleter"))
    variable = "HUDI_SINK__TABLE__STORAGE_OPTIONS__aws_secret_access_key"
    assert _env(container)[variable] == {"secretKeyRef": {"name": "orders-s3", "key": "secret"}}
    report = _config_check(sink_config_text(s3_docs), {variable: "made-up"}, tmp_path)
    assert report["config"]["table"]["storage_options"]["aws_secret_access_key"] == "<redacted>"
    assert report["sources"]["table.storage_options.aws_secret_access_key"] == "env"


@pytest.mark.parametrize(("values", "message"), [
    ({"secretConfig": {"admin.token": {"secretName": "a", "secretKey": "b"}}}, "admin.existingSecret"),
    ({"secretConfig": {"spark.conf.spark.hadoop.fs.s3a.bucket.Lake.secret.key": {"secretName": "a",
                                                                                  "secretKey": "b"}}},
     "lower-cases"),
    ({"kafka": {"securityProtocol": "SASL_SSL", "sasl": {"mechanism": "OAUTHBEARER"}}},
     "kafka.sasl.oauth.existingSecret"),
])
def test_unusable_secret_paths_are_refused(values: dict[str, Any], message: str, tmp_path: Path) -> None:
    result = _render_values(tmp_path, values)
    assert result.returncode != 0 and message in result.stderr, result.stderr


# --- Kafka: Strimzi's Secrets, OAUTHBEARER ----------------------------------------------------

def _mounts(doc: Doc) -> dict[str, str]:
    (container,) = containers(doc)
    volumes = {v["name"]: v for v in pod_spec(doc)["volumes"]}
    return {m["mountPath"]: volumes[m["name"]]["secret"]["secretName"]
            for m in container["volumeMounts"] if "secret" in volumes[m["name"]]}


def test_strimzi_cluster_ca_and_user_secrets_are_used_as_they_are() -> None:
    docs = render("strimzi")
    kafka = yaml.safe_load(sink_config_text(docs))["kafka"]
    assert kafka["security_protocol"] == "SSL"
    assert kafka["ssl_cafile"] == "/etc/hudi-sink/kafka-ca/ca.crt"
    assert kafka["ssl_certfile"] == "/etc/hudi-sink/kafka-tls/user.crt"
    assert kafka["ssl_keyfile"] == "/etc/hudi-sink/kafka-tls/user.key"
    for name in SINK_SERVICES:
        doc = deployment(docs, name)
        assert _mounts(doc) == {"/etc/hudi-sink/kafka-ca": "my-cluster-cluster-ca-cert",
                                "/etc/hudi-sink/kafka-tls": "hudi-sink"}
        (container,) = containers(doc)
        assert "HUDI_SINK__KAFKA__SASL_PLAIN_PASSWORD" not in _env(container)


def test_oauthbearer_reads_the_token_from_its_mounted_secret(tmp_path: Path) -> None:
    docs = render("oauthbearer")
    kafka = yaml.safe_load(sink_config_text(docs))["kafka"]
    assert kafka["sasl_mechanism"] == "OAUTHBEARER"
    assert kafka["sasl_oauth_token_file"] == "/etc/hudi-sink/kafka-oauth/access-token"
    assert "sasl_plain_username" not in kafka
    for name in SINK_SERVICES:
        doc = deployment(docs, name)
        mounts = _mounts(doc)
        assert mounts["/etc/hudi-sink/kafka-oauth"] == "kafka-oauth-token"
        (container,) = containers(doc)
        # The whole Secret as a directory, no subPath: kubelet updates the file when the Secret
        # changes, and the sink re-reads it at every login.
        assert not any("subPath" in m for m in container["volumeMounts"])
        assert "HUDI_SINK__KAFKA__SASL_PLAIN_PASSWORD" not in _env(container)
    msk = _render_values(tmp_path, {"kafka": {"securityProtocol": "SASL_SSL", "sasl": {
        "mechanism": "OAUTHBEARER", "oauth": {"mskRegion": "eu-west-1"}}}})
    assert msk.returncode == 0, msk.stderr
    msk_docs = [d for d in yaml.safe_load_all(msk.stdout) if d]
    assert yaml.safe_load(sink_config_text(msk_docs))["kafka"]["sasl_oauth_msk_region"] == "eu-west-1"


# --- storage -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("storage_class", "expected"), [("", None), ("-", ""), ("efs-sc", "efs-sc")])
def test_default_pvc_takes_the_clusters_default_storage_class(storage_class: str,
                                                              expected: str | None) -> None:
    docs = render("defaults", KUBE_VERSIONS[0], "--set-string", f"persistence.storageClass={storage_class}")
    (pvc,) = by_kind(docs, "PersistentVolumeClaim")
    assert pvc["spec"].get("storageClassName") == expected
    if not storage_class:
        assert "storageClassName" not in pvc["spec"]  # absent: the cluster's default class binds it


S3_WITH_CONNECT = {"persistence": {"enabled": False}, "sparkConnect": {"enabled": True},
                   "objectStore": {"existingSecret": "orders-s3"},
                   "config": {"table": {"base_path": "s3://lake/orders"}}}


def test_s3_through_spark_connect_needs_a_server_with_s3a(tmp_path: Path) -> None:
    ours = _render_values(tmp_path, S3_WITH_CONNECT)  # the chart's image ships hadoop-aws
    assert ours.returncode == 0, ours.stderr
    (server,) = containers(deployment([d for d in yaml.safe_load_all(ours.stdout) if d], "spark-connect"))
    assert server["envFrom"] == [{"secretRef": {"name": "orders-s3"}}]  # the server writes: credentials
    other = {**S3_WITH_CONNECT, "sparkConnect": {"enabled": True,
                                                 "image": {"repository": "apache/spark", "tag": "4.0.1"}}}
    refused = _render_values(tmp_path, other)
    assert refused.returncode != 0
    assert "sparkConnect.image.hadoopAws=true" in refused.stderr and "hadoop-aws" in refused.stderr
    other["sparkConnect"]["image"]["hadoopAws"] = True
    assert _render_values(tmp_path, other).returncode == 0
    gcs = _render_values(tmp_path, {**S3_WITH_CONNECT, "config": {"table": {"base_path": "gs://lake/orders"}}})
    assert gcs.returncode != 0 and "s3:// only" in gcs.stderr
