"""deploy/: the manifests, the unit and the image recipe, checked without a
cluster, a systemd PID 1 or a container build (ctest deploy.manifests).

- yamllint over deploy/ (deploy/.yamllint);
- the Kubernetes bases (the DaemonSet's, the cluster's) and overlays rendered
  as `kustomize build` would render them (resources, JSON 6902 patches,
  namespace and image tag: the only transforms they use; kustomize is not in
  Debian) and every object validated against the Kubernetes 1.37 API
  schemas (kubernetes-validate, strict: unknown fields fail). The ServiceMonitor
  and the PrometheusRule are CRDs those schemas lack: they get the structural
  checks below, and the PrometheusRule's rules must be deploy/prometheus's
  (which promtool checks and unit-tests), each alert's runbook_url a section
  of docs/runbook.md;
- the fleet overlay (overlays/fleet-when-idle): no GPU request, every GPU
  through the NVIDIA runtime, --gpu-sharing=when-idle, idle workers parked
  (--worker-idle-exit), results on a hostPath
  made benchd's; the dedicated base keeps its GPU request;
- the daemon's own rules on the DaemonSet's flags (TLS and an auth file off
  loopback, --insecure for /metrics off loopback), the names tying the
  Service, ServiceMonitor and probes to the container, the grace periods;
- the cluster Job + headless Service: the names, sizes and variables that
  must agree for the pods to find each other, and benchd-cluster-run (its
  entry point) against stand-ins for benchd and benchctl;
- `systemd-analyze verify` of benchd.service with no output at all (it exits
  0 on unknown keys and only prints them), and benchd-wait-ready against a
  real process;
- benchd-health's hand-made health messages against grpcio-health-checking's;
- the Containerfile's stages against scripts/setup.sh's package list, and its
  runtime packages against the Debian libraries the built binaries load;
- the Apptainer definition (container/benchd.def) parsed as Apptainer parses
  it, and compared with the Containerfile stage by stage (every command, the
  apt packages, the ARGs, the copied sources, the entry point): checked, not
  built (Apptainer is not packaged for Debian 12).
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BASE = DEPLOY / "kubernetes" / "base"
KUBERNETES_VERSION = "1.37.0"
STOP_GRACE_S = 10           # benchd's --stop-grace default (server/daemon/daemon_config.h)
SERVER_SHUTDOWN_S = 5       # server->Shutdown deadline in server/daemon/daemon.cc
NAMESPACED_KINDS = {"DaemonSet", "Job", "Service", "ServiceMonitor", "PrometheusRule", "NetworkPolicy",
                    "ConfigMap"}
# The CRDs of prometheus-operator: not in the Kubernetes schemas, checked below.
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}


def test_yamllint():
    result = subprocess.run([sys.executable, "-m", "yamllint", "--strict", "-c",
                             str(DEPLOY / ".yamllint"), str(DEPLOY)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def render(directory):
    """kustomize build DIRECTORY, for the transforms deploy/kubernetes uses:
    resources (files, or directories that are kustomizations themselves),
    JSON 6902 patches (add, replace, remove, test, copy), then namespace and
    image tag. Returns the kustomization and the objects."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    used = set(kustomization) - {"apiVersion", "kind"}
    # A new transform (labels, generators, strategic merge ...) needs rendering here first.
    assert used <= {"namespace", "resources", "images", "patches"}, used
    objects = []
    for resource in kustomization["resources"]:
        path = directory / resource
        if path.is_dir():
            objects += render(path)[1]
        else:
            # kustomize loads files from inside the kustomization's root only.
            assert path.resolve().is_relative_to(directory.resolve()), resource
            objects += list(yaml.safe_load_all(path.read_text()))
    for patch in kustomization.get("patches", []):
        targets = [o for o in objects if o["kind"] == patch["target"]["kind"]
                   and o["metadata"]["name"] == patch["target"]["name"]]
        assert len(targets) == 1, patch["target"]
        for op in yaml.safe_load((directory / patch["path"]).read_text()):
            apply_json_patch_op(targets[0], op)
    for obj in objects:
        if "namespace" in kustomization and obj["kind"] in NAMESPACED_KINDS:
            obj["metadata"]["namespace"] = kustomization["namespace"]
    images = {i["name"]: i for i in kustomization.get("images", [])}
    for obj in objects:
        for pod in pod_specs(obj):
            for container in pod["containers"] + pod.get("initContainers", []):
                name = container["image"].split(":")[0]
                if name in images:
                    image = images[name]
                    container["image"] = f"{image.get('newName', name)}:{image['newTag']}"
    return kustomization, objects


def json_pointer(obj, path):
    node = obj
    for key in path.lstrip("/").split("/"):
        node = node[int(key)] if isinstance(node, list) else node[key.replace("~1", "/").replace("~0", "~")]
    return node


def apply_json_patch_op(obj, op):
    """One RFC 6902 operation, as kustomize applies it: a path that must exist
    for replace, remove and test; "-" appends to a list; a failed test fails;
    copy adds a copy of what `from` points at."""
    assert op["op"] in ("add", "replace", "remove", "test", "copy"), op["op"]
    if op["op"] == "copy":
        op = {"op": "add", "path": op["path"], "value": json.loads(json.dumps(json_pointer(obj, op["from"])))}
    *parents, last = op["path"].lstrip("/").split("/")
    node = obj
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if isinstance(node, list):
        if op["op"] == "add":
            node.insert(len(node) if last == "-" else int(last), op["value"])
            return
        index = int(last)
        assert 0 <= index < len(node), op["path"]
    else:
        index = last
        assert op["op"] == "add" or index in node, op["path"]  # the path must exist
    if op["op"] == "remove":
        del node[index]
    elif op["op"] == "test":
        assert node[index] == op["value"], (op["path"], node[index], op["value"])
    else:
        node[index] = op["value"]


def render_base():
    """kustomize build deploy/kubernetes/base."""
    kustomization, objects = render(BASE)
    assert "patches" not in kustomization
    return kustomization, objects


def pod_specs(obj):
    template = obj.get("spec", {}).get("template")
    return [template["spec"]] if template else []


@pytest.fixture(scope="module")
def rendered():
    return render_base()[1]


def one(objects, kind):
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def test_every_file_of_the_base_is_a_resource():
    kustomization, _ = render_base()
    files = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert files == set(kustomization["resources"])


def test_objects_validate_against_the_kubernetes_schemas(rendered):
    import kubernetes_validate

    checked = []
    for obj in rendered:
        if obj["kind"] in OPERATOR_KINDS:
            continue  # CRDs: test_servicemonitor_structure, test_prometheusrule_*
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        checked.append(obj["kind"])
    assert sorted(checked) == ["DaemonSet", "Namespace", "NetworkPolicy", "Service"]


def test_schema_validation_catches_a_wrong_field(rendered):
    """The validator is strict: a misspelled field fails (so the test above can fail)."""
    import kubernetes_validate

    daemonset = yaml.safe_load(yaml.safe_dump(one(rendered, "DaemonSet")))
    daemonset["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, KUBERNETES_VERSION, strict=True)


# The rules of prometheus-operator 0.84.1's ServiceMonitor CRD
# (example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml)
# for the fields used here, copied as rules, not as the CRD: a duration and a
# label name as its patterns say, spec.selector and spec.endpoints required.
CRD_DURATION = r"(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)"
CRD_LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"


def test_servicemonitor_structure(rendered):
    """monitoring.coreos.com/v1 ServiceMonitor: the fields used here, their
    types and patterns, and the port it scrapes is the Service's named port,
    which is the container's."""
    monitor = one(rendered, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    spec = monitor["spec"]
    assert {"selector", "endpoints"} <= set(spec)
    assert set(spec) <= {"selector", "endpoints", "namespaceSelector", "jobLabel"}
    assert all(isinstance(v, str) for v in spec["selector"]["matchLabels"].values())
    allowed = {"port", "path", "interval", "scrapeTimeout", "scheme", "relabelings",
               "metricRelabelings", "honorLabels"}
    service = one(rendered, "Service")
    assert all(service["metadata"]["labels"].get(k) == v
               for k, v in spec["selector"]["matchLabels"].items())
    service_ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert spec["endpoints"]
    for endpoint in spec["endpoints"]:
        assert set(endpoint) <= allowed, set(endpoint) - allowed
        assert isinstance(endpoint["port"], str) and endpoint["port"] in service_ports
        assert isinstance(endpoint.get("path", ""), str)
        for duration in ("interval", "scrapeTimeout"):
            assert re.fullmatch(CRD_DURATION, endpoint.get(duration, "0")), duration
        for relabel in endpoint.get("relabelings", []):
            assert set(relabel) <= {"sourceLabels", "targetLabel", "regex", "replacement",
                                    "action", "separator", "modulus"}
            assert all(re.fullmatch(CRD_LABEL_NAME, label)
                       for label in relabel.get("sourceLabels", []))
            assert isinstance(relabel.get("targetLabel", ""), str)


PROMETHEUS_RULES = [DEPLOY / "prometheus" / "rules" / name
                    for name in ("benchd-recording.yml", "benchd-alerts.yml")]
RUNBOOK = ROOT / "docs" / "runbook.md"


def check_prometheusrule(rule):
    """monitoring.coreos.com/v1 PrometheusRule as prometheus-operator 0.84.1's
    CRD (monitoring.coreos.com_prometheusrules.yaml) has it, for the fields
    used here: spec.groups required, each group a unique name, an optional
    duration interval and its rules; a rule records or alerts (one of them),
    with an expr, an optional `for` duration, string labels and annotations."""
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(rule) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(rule["spec"]) == {"groups"}
    names = [g["name"] for g in rule["spec"]["groups"]]
    assert len(names) == len(set(names)), names
    for group in rule["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit", "query_offset", "labels"}, group
        assert isinstance(group["name"], str) and group["name"]
        assert re.fullmatch(CRD_DURATION, group.get("interval", "0")), group["name"]
        assert group["rules"], group["name"]
        for r in group["rules"]:
            assert set(r) <= {"record", "alert", "expr", "for", "keep_firing_for", "labels",
                              "annotations"}, r
            assert ("record" in r) != ("alert" in r), r
            assert isinstance(r["expr"], (str, int)) and str(r["expr"]).strip(), r
            assert re.fullmatch(CRD_DURATION, r.get("for", "0")), r
            for key in ("labels", "annotations"):
                assert all(isinstance(k, str) and isinstance(v, str)
                           for k, v in r.get(key, {}).items()), (key, r)
            if "record" in r:
                assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", r["record"]), r["record"]
                assert "annotations" not in r and "for" not in r, r


def test_prometheusrule_structure(rendered):
    check_prometheusrule(one(rendered, "PrometheusRule"))


def test_prometheusrule_structure_catches_a_wrong_field(rendered):
    """The check above can fail: a rule that both records and alerts, a
    misspelled field, a duration the CRD refuses."""
    for breaks in (lambda r: r["spec"]["groups"][0]["rules"][0].update(alert="X"),
                   lambda r: r["spec"]["groups"][1]["rules"][0].update(fro="2m"),
                   lambda r: r["spec"]["groups"][1]["rules"][0].update({"for": "2 minutes"})):
        rule = yaml.safe_load(yaml.safe_dump(one(rendered, "PrometheusRule")))
        breaks(rule)
        with pytest.raises(AssertionError):
            check_prometheusrule(rule)


def test_prometheusrule_carries_deploy_prometheus_rules(rendered):
    """The operator's copy is the rule files' groups, to the character of
    every expr and annotation: promtool's unit tests cover both."""
    groups = [g for path in PROMETHEUS_RULES for g in yaml.safe_load(path.read_text())["groups"]]
    assert one(rendered, "PrometheusRule")["spec"]["groups"] == groups


def markdown_anchors(text):
    """GitHub's anchors of a Markdown file's headings."""
    anchors = set()
    for line in text.splitlines():
        m = re.match(r"#+ (.+)", line)
        if m:
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return anchors


def test_every_alert_links_its_runbook_section():
    anchors = markdown_anchors(RUNBOOK.read_text())
    alerts = [r for path in PROMETHEUS_RULES for g in yaml.safe_load(path.read_text())["groups"]
              for r in g["rules"] if "alert" in r]
    assert len(alerts) >= 7, alerts
    for alert in alerts:
        url = alert["annotations"].get("runbook_url", "")
        path, _, anchor = url.partition("#")
        assert path == "docs/runbook.md", (alert["alert"], url)
        assert anchor == alert["alert"].lower() and anchor in anchors, (alert["alert"], url)
    # And no section for an alert that is not there.
    assert anchors - {"runbook-benchds-alerts"} == {a["alert"].lower() for a in alerts}


def container_of(rendered):
    return pod_specs(one(rendered, "DaemonSet"))[0]["containers"][0]


def flags(container):
    out = {}
    for arg in container["args"]:
        name, _, value = arg.partition("=")
        out[name] = value
    return out


def is_loopback(address):
    host = address.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def test_daemonset_satisfies_the_daemons_rules(rendered):
    """docs/architecture.md "Who gets in": off loopback, benchd wants TLS and a
    check of callers, and /metrics only with --insecure."""
    pod = pod_specs(one(rendered, "DaemonSet"))[0]
    check_daemon_rules(pod, pod["containers"][0])


def check_daemon_rules(pod, container):
    f = flags(container)
    if not is_loopback(f["--listen"]):
        assert f.get("--tls-cert") and f.get("--tls-key")
        assert f.get("--auth-file") or f.get("--tls-client-ca")
    if f.get("--metrics", "127.0.0.1:9531") != "off" and not is_loopback(f["--metrics"]):
        assert "--insecure" in f
    # Every file named in a flag lies in a mounted volume.
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    for flag in ("--tls-cert", "--tls-key", "--auth-file", "--data-dir"):
        path = f[flag]
        assert any(path == m or path.startswith(m + "/") for m in mounts), (flag, path)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(mounts.values()) <= set(volumes)
    # The auth file must not be group/other-writable (server/security/auth.cc).
    assert volumes["auth"]["secret"]["defaultMode"] & 0o022 == 0
    # The drain fits the termination grace.
    grace = int(f.get("--stop-grace", STOP_GRACE_S))
    assert pod["terminationGracePeriodSeconds"] >= grace + SERVER_SHUTDOWN_S + 10


def test_gpu_scheduling(rendered):
    pod = pod_specs(one(rendered, "DaemonSet"))[0]
    container = pod["containers"][0]
    assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    assert pod["nodeSelector"]
    # The dedicated pool: the GPUs it holds are its own.
    assert flags(container).get("--gpu-sharing", "dedicated") == "dedicated"


def test_names_tie_together(rendered):
    daemonset = one(rendered, "DaemonSet")
    container = container_of(rendered)
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    f = flags(container)
    assert ports["grpc"] == int(f["--listen"].rsplit(":", 1)[1])
    assert ports["metrics"] == int(f["--metrics"].rsplit(":", 1)[1])
    service = one(rendered, "Service")
    assert all(pod_labels.get(k) == v for k, v in service["spec"]["selector"].items())
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(ports)
    policy = one(rendered, "NetworkPolicy")
    assert all(pod_labels.get(k) == v for k, v in policy["spec"]["podSelector"]["matchLabels"].items())
    policy_ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert policy_ports == set(ports)
    # The probes ask the daemon's own port, over TLS, with the mounted CA.
    for probe, service_name in (("livenessProbe", ""), ("readinessProbe", "benchd.v1.Bench")):
        command = container[probe]["exec"]["command"]
        assert command[0] == "benchd-health"
        args = dict(a.partition("=")[::2] for a in command[1:])
        assert args["--address"] == f"127.0.0.1:{ports['grpc']}"
        assert args["--service"] == service_name
        assert args["--tls-ca"].startswith("/etc/benchd/tls/")


OVERLAY = DEPLOY / "kubernetes" / "overlays" / "grpc-probe-tls"


def render_overlay():
    """kustomize build of the overlay: the base, then its JSON 6902 patches."""
    kustomization, objects = render(OVERLAY)
    assert set(kustomization) - {"apiVersion", "kind"} == {"resources", "patches"}
    assert kustomization["resources"] == ["../../base"]
    return objects


def test_overlay_grpc_probe_tls():
    import kubernetes_validate

    objects = render_overlay()
    for obj in objects:
        if obj["kind"] not in OPERATOR_KINDS:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    container = container_of(objects)
    assert container["name"] == "benchd"  # the patch's path names container 0
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probe = container["readinessProbe"]
    assert set(probe) - {"periodSeconds", "timeoutSeconds", "failureThreshold"} == {"grpc"}
    assert probe["grpc"] == {"port": ports["grpc"], "service": "benchd.v1.Bench", "mode": "TLS"}
    assert container["livenessProbe"]["exec"]["command"][0] == "benchd-health"
    # mode is new in 1.37: the 1.36 API has no such field.
    daemonset = one(objects, "DaemonSet")
    with pytest.raises(kubernetes_validate.ValidationError, match="'mode' was unexpected"):
        kubernetes_validate.validate(daemonset, "1.36.0", strict=True)


FLEET = DEPLOY / "kubernetes" / "overlays" / "fleet-when-idle"


def test_overlay_fleet_when_idle(rendered):
    """Fleet mode (deploy/README.md "Sharing GPUs with training jobs"): the
    pod holds no GPU, sees every GPU through the NVIDIA runtime with NVML
    (utility), runs benchd --gpu-sharing=when-idle in the host's PID namespace
    (NVML's pids), and keeps its data on the node, owned by benchd's uid."""
    import kubernetes_validate

    kustomization, objects = render(FLEET)
    assert kustomization["resources"] == ["../../base"]
    for obj in objects:
        if obj["kind"] not in OPERATOR_KINDS:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    pod = pod_specs(one(objects, "DaemonSet"))[0]
    container = pod["containers"][0]
    assert container["name"] == "benchd"
    assert "nvidia.com/gpu" not in yaml.safe_dump(pod["containers"])
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert "utility" in env["NVIDIA_DRIVER_CAPABILITIES"].split(",")
    assert flags(container)["--gpu-sharing"] == "when-idle"
    # Idle workers parked: the pod holds no GPU between jobs either.
    assert flags(container)["--worker-idle-exit"] == "60"
    assert pod["hostPID"] is True
    # Still on GPU nodes only, past their taint.
    assert pod["nodeSelector"] and any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    check_daemon_rules(pod, container)
    # Results survive a rollout: the data dir is a hostPath, made benchd's
    # (uid, private) by an init container before benchd starts.
    volumes = {v["name"]: v for v in pod["volumes"]}
    data_mount = next(m for m in container["volumeMounts"] if m["name"] == "data")
    assert flags(container)["--data-dir"] == data_mount["mountPath"]
    assert volumes["data"]["hostPath"]["type"] == "DirectoryOrCreate"
    (init,) = pod["initContainers"]
    assert init["image"] == container["image"]
    assert init["volumeMounts"] == [{"name": "data", "mountPath": data_mount["mountPath"]}]
    uid = pod["securityContext"]["runAsUser"]
    assert f"chown {uid}:{pod['securityContext']['runAsGroup']} {data_mount['mountPath']}" in init["command"][-1]
    assert "chmod 0700" in init["command"][-1]
    assert set(init["securityContext"]["capabilities"]["add"]) == {"CHOWN", "FOWNER"}
    assert init["securityContext"]["capabilities"]["drop"] == ["ALL"]
    # Everything else is the base's.
    base = pod_specs(one(rendered, "DaemonSet"))[0]["containers"][0]
    for key in ("readinessProbe", "livenessProbe", "securityContext", "ports", "volumeMounts"):
        assert container[key] == base[key], key
    assert flags(container).items() - {("--gpu-sharing", "when-idle"),
                                       ("--worker-idle-exit", "60")} == flags(base).items()


# --- the cluster: an Indexed Job + headless Service (deploy/kubernetes/cluster)

CLUSTER = DEPLOY / "kubernetes" / "cluster"
CLUSTER_CPU = DEPLOY / "kubernetes" / "overlays" / "cluster-cpu-gloo"
CLUSTER_RUN = DEPLOY / "container" / "benchd-cluster-run"


@pytest.fixture(scope="module")
def cluster():
    return render(CLUSTER)[1]


def env_of(container):
    names = [e["name"] for e in container["env"]]
    assert len(names) == len(set(names)), names
    return {e["name"]: e for e in container["env"]}


def job_parts(objects):
    job = one(objects, "Job")
    pod = pod_specs(job)[0]
    assert len(pod["containers"]) == 1
    return job, pod, pod["containers"][0]


def test_every_file_of_the_cluster_base_is_a_resource():
    kustomization, _ = render(CLUSTER)
    files = {p.name for p in CLUSTER.glob("*.yaml")} - {"kustomization.yaml"}
    assert files == set(kustomization["resources"])
    # The Namespace is ../base's: deleting the cluster must not delete it
    # (and the Secrets in it).
    assert kustomization["namespace"] == render_base()[0]["namespace"]


@pytest.mark.parametrize("directory", [CLUSTER, CLUSTER_CPU], ids=["cluster", "cluster-cpu-gloo"])
def test_cluster_validates_against_the_kubernetes_schemas(directory):
    import kubernetes_validate

    objects = render(directory)[1]
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert sorted(o["kind"] for o in objects) == ["Job", "NetworkPolicy", "Service"]
    assert all(o["metadata"]["namespace"] == "benchd" for o in objects)


def test_cluster_schema_validation_catches_a_wrong_field(cluster):
    import kubernetes_validate

    job = yaml.safe_load(yaml.safe_dump(one(cluster, "Job")))
    job["spec"]["successPolicy"]["rules"][0]["succeededIndex"] = "0"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)


def test_cluster_job_is_an_indexed_job_of_benchd_nodes(cluster):
    """rank = JOB_COMPLETION_INDEX only in an Indexed Job; the cluster's size,
    the Job's completions and its parallelism must agree, or the daemons wait
    for members that never come (or a rank is out of range)."""
    job, pod, container = job_parts(cluster)
    spec = job["spec"]
    env = env_of(container)
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == int(env["BENCHD_NODES"]["value"]) >= 2
    # How it ends (benchd-cluster-run): index 0 succeeding ends the Job (the
    # controller stops the other daemons); any pod failing fails it.
    assert spec["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    assert spec["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"
    assert spec.get("activeDeadlineSeconds", 0) > 0
    # The pods' hostnames are <job>-<index>: DNS labels.
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", job["metadata"]["name"])
    assert len(f"{job['metadata']['name']}-{spec['completions'] - 1}") <= 63


def test_cluster_dns_names(cluster):
    """benchd finds rank 0 at ${BENCHD_CLUSTER_JOB}-0.${BENCHD_CLUSTER_SERVICE}
    and advertises ${HOSTNAME}.${BENCHD_CLUSTER_SERVICE}: those names exist
    only when the pod's subdomain is a headless Service that selects it."""
    job, pod, container = job_parts(cluster)
    service = one(cluster, "Service")
    env = env_of(container)
    name = service["metadata"]["name"]
    assert pod["subdomain"] == name == env["BENCHD_CLUSTER_SERVICE"]["value"]
    assert "hostname" not in pod  # the Indexed Job sets <job>-<index>
    assert service["spec"]["clusterIP"] == "None"
    # The members dial each other before their readiness passes (it waits for
    # the workers): the records must exist for pods not ready yet.
    assert service["spec"]["publishNotReadyAddresses"] is True
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"] and \
        all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
    # The Job's name from the label the Job controller puts on its pods.
    assert env["BENCHD_CLUSTER_JOB"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}
    # JOB_COMPLETION_INDEX comes from the Job controller, not from here.
    assert "JOB_COMPLETION_INDEX" not in env
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["grpc"]
    assert service["spec"]["ports"][0]["port"] == ports["grpc"]


def test_cluster_variables_are_the_daemons():
    """The variables benchd --cluster-from kubernetes reads (server/cluster/cluster_config.cc)."""
    source = (ROOT / "server" / "cluster" / "cluster_config.cc").read_text()
    for name in ("JOB_COMPLETION_INDEX", "BENCHD_NODES", "BENCHD_CLUSTER_SERVICE",
                 "BENCHD_CLUSTER_JOB"):
        assert f'Require(env, "{name}", "kubernetes")' in source, name
    assert 'absl::StrCat(*job, "-0.", *service, ":", port)' in source


def test_cluster_flags_and_credentials(cluster):
    job, pod, container = job_parts(cluster)
    assert container["command"] == ["benchd-cluster-run"]
    f = flags(container)
    assert f["--cluster-from"] == "kubernetes"
    # These would override what the launcher gives every pod alike.
    assert not {"--cluster-coordinator", "--node-rank", "--nodes", "--node-name",
                "--advertise"} & set(f)
    check_daemon_rules(pod, container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["grpc"] == int(f["--listen"].rsplit(":", 1)[1])
    assert ports["metrics"] == int(f["--metrics"].rsplit(":", 1)[1])
    # No hostPort: the Job may share nodes with the DaemonSet (which has 7531).
    assert not any("hostPort" in p for p in container["ports"])
    # Node-to-node calls (and benchctl in benchd-cluster-run) carry a token
    # over TLS, checked against the CA for the certificate's name, the one the
    # probes check too; every file in a mounted Secret.
    env = env_of(container)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for variable in ("BENCHD_TOKEN_FILE", "BENCHD_TLS_CA"):
        path = env[variable]["value"]
        mount = [m for m in mounts if path.startswith(m + "/")]
        assert mount, (variable, path)
        assert "secret" in volumes[mounts[mount[0]]], variable
    assert env["BENCHD_TLS_CA"]["value"] == "/etc/benchd/tls/ca.crt"
    assert volumes[mounts["/etc/benchd/token"]]["secret"]["defaultMode"] & 0o022 == 0
    # The cluster's secret: a file of a mounted Secret, not readable by
    # others (benchd refuses it then: server/cluster/cluster_config.cc).
    secret = f["--cluster-secret-file"]
    mount = [m for m in mounts if secret.startswith(m + "/")]
    assert mount, secret
    assert volumes[mounts[mount[0]]]["secret"]["secretName"] == "benchd-cluster-secret"
    assert volumes[mounts[mount[0]]]["secret"]["defaultMode"] & 0o026 == 0
    probe_args = dict(a.partition("=")[::2]
                      for a in container["readinessProbe"]["exec"]["command"][1:])
    assert env["BENCHD_TLS_SERVER_NAME"]["value"] == probe_args["--tls-server-name"]


def test_cluster_probes_and_pod_are_the_daemonsets(cluster, rendered):
    """Same probes, security context, mounts of the shared Secrets and stop
    grace as the DaemonSet: one way to run benchd in a pod."""
    _, pod, container = job_parts(cluster)
    ds_pod = pod_specs(one(rendered, "DaemonSet"))[0]
    ds_container = ds_pod["containers"][0]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe] == ds_container[probe], probe
    assert container["securityContext"] == ds_container["securityContext"]
    assert pod["securityContext"] == ds_pod["securityContext"]
    assert pod["terminationGracePeriodSeconds"] == ds_pod["terminationGracePeriodSeconds"]
    assert container["image"] == ds_container["image"]
    ds_volumes = {v["name"]: v for v in ds_pod["volumes"]}
    for volume in pod["volumes"]:
        if volume["name"] in ds_volumes:
            assert volume == ds_volumes[volume["name"]], volume["name"]
    ds_mounts = {m["name"]: m for m in ds_container["volumeMounts"]}
    for mount in container["volumeMounts"]:
        if mount["name"] in ds_mounts:
            assert mount == ds_mounts[mount["name"]], mount["name"]
    for flag, value in flags(ds_container).items():
        assert flags(container).get(flag) == value, flag


def test_cluster_gpu_scheduling(cluster):
    job, pod, container = job_parts(cluster)
    assert int(container["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    assert pod["nodeSelector"]
    # One member per node: a required anti-affinity on the pods' own labels.
    labels = job["spec"]["template"]["metadata"]["labels"]
    terms = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert len(terms) == 1 and terms[0]["topologyKey"] == "kubernetes.io/hostname"
    assert terms[0]["labelSelector"]["matchLabels"].items() <= labels.items()
    env = env_of(container)
    assert env["BENCHD_CLUSTER_DEVICE"]["value"] == "cuda:0"
    assert env["BENCHD_CLUSTER_BACKEND"]["value"] == "nccl"
    assert env["NCCL_NVLS_ENABLE"]["value"] == "0"
    assert env["NCCL_SOCKET_IFNAME"]["value"]


def test_cluster_network_policy(cluster, rendered):
    job, _, container = job_parts(cluster)
    labels = job["spec"]["template"]["metadata"]["labels"]
    policy = one(cluster, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    # The members reach each other on every port (TCPStore, NCCL, Gloo).
    peers = [r for r in policy["spec"]["ingress"] if "ports" not in r]
    assert len(peers) == 1
    assert peers[0]["from"] == [{"podSelector": policy["spec"]["podSelector"]}]
    ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule.get("ports", [])}
    assert ports == {p["name"] for p in container["ports"]}
    # The DaemonSet's policy does not select the cluster's pods (its ports only).
    daemon_policy = one(rendered, "NetworkPolicy")
    assert not daemon_policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def run_script_variables():
    text = CLUSTER_RUN.read_text()
    return set(re.findall(r"\$\{(BENCHD_[A-Z_]+|JOB_COMPLETION_INDEX)", text))


def test_cluster_env_is_what_benchd_cluster_run_reads(cluster):
    """Every BENCHD_CLUSTER_* / BENCHD_SWEEP_* variable the Job sets is one
    benchd-cluster-run reads (a misspelt one would be silently ignored)."""
    _, _, container = job_parts(cluster)
    env = env_of(container)
    read = run_script_variables()
    for name in env:
        if name.startswith(("BENCHD_CLUSTER_DEVICE", "BENCHD_CLUSTER_BACKEND", "BENCHD_SWEEP_")):
            assert name in read, name
    assert {"JOB_COMPLETION_INDEX", "BENCHD_NODES", "BENCHD_TOKEN_FILE"} <= read


def test_cluster_cpu_gloo_overlay():
    kustomization, objects = render(CLUSTER_CPU)
    assert kustomization["resources"] == ["../../cluster"]
    _, pod, container = job_parts(objects)
    env = env_of(container)
    assert env["BENCHD_CLUSTER_DEVICE"]["value"] == "cpu:0"
    assert env["BENCHD_CLUSTER_BACKEND"]["value"] == "gloo"
    assert flags(container)["--device"] == "cpu:0"
    assert "nvidia.com/gpu" not in yaml.safe_dump(pod)
    assert "nodeSelector" not in pod and "tolerations" not in pod
    assert "podAntiAffinity" in pod["affinity"]
    # Everything else is the base's.
    _, base_pod, base_container = job_parts(render(CLUSTER)[1])
    assert container["readinessProbe"] == base_container["readinessProbe"]
    assert env["BENCHD_NODES"] == env_of(base_container)["BENCHD_NODES"]


def test_json_patch_test_op_guards_the_overlay():
    """The overlay's `test` ops fail the rendering when the base's env moves."""
    job = one(render(CLUSTER)[1], "Job")
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    env.insert(0, env.pop())
    ops = yaml.safe_load((CLUSTER_CPU / "cpu-gloo.yaml").read_text())
    with pytest.raises(AssertionError):
        for op in ops:
            apply_json_patch_op(job, op)


def test_benchd_takes_the_manifests_flags(cluster, rendered):
    """Every flag the DaemonSet and the Job give benchd is one this build's
    benchd has (--cluster-from with kubernetes among its values)."""
    binaries = bin_dir()
    if binaries is None:
        missing("no benchd binary: set BENCHD_BIN_DIR (ctest does)")
    help_text = subprocess.run([str(binaries / "benchd"), "--help"], capture_output=True,
                               text=True, check=True).stdout
    containers = [job_parts(cluster)[2], container_of(rendered),
                  job_parts(render(CLUSTER_CPU)[1])[2], container_of(render(FLEET)[1])]
    for container in containers:
        for flag in flags(container):
            assert re.search(rf"(^|[ ,]){re.escape(flag)}\b", help_text, re.M), flag
    assert "kubernetes" in help_text


# --- benchd-cluster-run, against stand-ins for benchd and benchctl

FAKE_BENCHD = """#!/bin/bash
printf '%s\\n' "$@" > "$STUB/benchd.args"
echo "$BENCHD_TOKEN_FILE" > "$STUB/benchd.token_file"
[ -n "${STUB_BENCHD_EXIT:-}" ] && exit "$STUB_BENCHD_EXIT"
trap 'echo term >> "$STUB/benchd.term"; rm "$STUB/benchd.serving"; exit 0' TERM
touch "$STUB/benchd.serving"
while :; do sleep 0.05; done
"""

FAKE_BENCHCTL = """#!/bin/bash
echo "$*" >> "$STUB/benchctl.calls"
case "$*" in
  "--timeout 2 node") [ -e "$STUB/benchd.serving" ] ;;
  "nodes --wait "*) exit "${STUB_WAIT_RC:-0}" ;;
  "nodes") echo "NAME RANK STATE" ;;
  "nodes --json")
    echo '{"nodes": [{"name": "node0", "state": "NODE_STATE_READY", "devices":
      [{"name": "cpu:0", "workerState": "WORKER_STATE_UP"}]}, {"name": "node1",
      "state": "NODE_STATE_READY", "devices": [{"name": "cpu:0", "workerState":
      "WORKER_STATE_UP"}]}], "expectedNodes": 2}' ;;
  "groups create "*) echo '{"id": "g7", "devices": []}' ;;
  "submit collective "*) cat "$STUB/job.json"; exit "${STUB_SUBMIT_RC:-0}" ;;
  *) echo "unexpected: $*" >&2; exit 9 ;;
esac
"""


def job_json(wrong):
    rows = [{"sizeBytes": "1024", "wrongElements": "0"},
            {"sizeBytes": "2048", "wrongElements": str(wrong)}]
    return json.dumps({"id": "3", "state": "JOB_STATE_SUCCEEDED", "result": {"collective": {
        "rows": rows, "wrongElements": str(wrong)}}})


@pytest.fixture
def stub(tmp_path):
    for name, text in (("benchd", FAKE_BENCHD), ("benchctl", FAKE_BENCHCTL)):
        path = tmp_path / name
        path.write_text(text)
        path.chmod(0o755)
    (tmp_path / "job.json").write_text(job_json(0))
    token = tmp_path / "token"
    token.write_text("secret-token\n")
    token.chmod(0o440)  # as a Secret volume's file
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHD_")}
    env.update(STUB=str(tmp_path), BENCHD=str(tmp_path / "benchd"),
               BENCHCTL=str(tmp_path / "benchctl"), BENCHD_NODES="2",
               BENCHD_CLUSTER_DEVICE="cpu:0", BENCHD_CLUSTER_BACKEND="gloo",
               BENCHD_SWEEP_MIN="1KiB", BENCHD_SWEEP_MAX="64MiB",
               BENCHD_TOKEN_FILE=str(token), TMPDIR=str(tmp_path))
    return tmp_path, env


def run_cluster(env, rank, **extra):
    return subprocess.run([str(CLUSTER_RUN), "--cluster-from=kubernetes", "--listen=0.0.0.0:7531"],
                          env={**env, "JOB_COMPLETION_INDEX": str(rank), **extra},
                          capture_output=True, text=True, timeout=60)


def test_cluster_run_rank0_runs_the_sweep(stub):
    tmp, env = stub
    result = run_cluster(env, 0)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["id"] == "3"  # the JSON alone on stdout
    assert "PASS" in result.stderr
    assert result.stderr.rstrip().endswith("the job as JSON follows")
    calls = (tmp / "benchctl.calls").read_text().splitlines()
    assert "nodes --wait 2 --wait-timeout 600" in calls
    assert "groups create --devices node0/cpu:0,node1/cpu:0 --backend gloo --json" in calls
    assert ("submit collective --group g7 --op all_reduce --min 1KiB --max 64MiB --watch --json"
            in calls)
    assert (tmp / "benchd.args").read_text().split() == ["--cluster-from=kubernetes",
                                                        "--listen=0.0.0.0:7531"]
    assert (tmp / "benchd.term").read_text() == "term\n"  # stopped before the JSON
    # The daemon and benchctl read a private copy of the group-readable token.
    copy = pathlib.Path((tmp / "benchd.token_file").read_text().strip())
    assert copy != tmp / "token" and copy.read_text() == "secret-token\n"
    assert copy.stat().st_mode & 0o077 == 0


def test_cluster_run_rank0_fails_on_wrong_elements(stub):
    tmp, env = stub
    (tmp / "job.json").write_text(job_json(5))
    result = run_cluster(env, 0)
    assert result.returncode == 1 and "5 wrong elements: FAIL" in result.stderr
    assert json.loads(result.stdout)["result"]["collective"]["wrongElements"] == "5"
    (tmp / "job.json").write_text(job_json(0))
    failed = run_cluster(env, 0, STUB_SUBMIT_RC="1")  # the job failed
    assert failed.returncode == 1
    assert (tmp / "benchd.term").read_text() == "term\nterm\n"


def test_cluster_run_rank0_cluster_does_not_form(stub):
    tmp, env = stub
    result = run_cluster(env, 0, STUB_WAIT_RC="1")
    assert result.returncode == 2 and "did not form" in result.stderr
    assert "groups create" not in (tmp / "benchctl.calls").read_text()
    assert (tmp / "benchd.term").exists()


def test_cluster_run_daemon_exits_early(stub):
    tmp, env = stub
    for rank, rc in ((0, 2), (1, 3)):
        result = run_cluster(env, rank, STUB_BENCHD_EXIT="3")
        assert result.returncode == rc, (rank, result.stderr)
        assert "status 3" in result.stderr


def test_cluster_run_member_runs_until_stopped(stub):
    """A rank other than 0 only runs its daemon; SIGTERM (from the Job
    controller once index 0 succeeded) reaches benchd."""
    import signal
    import time

    tmp, env = stub
    member = subprocess.Popen([str(CLUSTER_RUN), "--listen=0.0.0.0:7531"],
                              env={**env, "JOB_COMPLETION_INDEX": "1"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (tmp / "benchd.args").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert member.poll() is None
        member.send_signal(signal.SIGTERM)
        out, err = member.communicate(timeout=20)
    finally:
        member.kill()
    assert member.returncode == 0, err
    assert (tmp / "benchd.term").read_text() == "term\n"
    assert not (tmp / "benchctl.calls").exists()


# --- systemd

UNIT = DEPLOY / "systemd" / "benchd.service"
ENV_FILE = DEPLOY / "systemd" / "benchd.env"
WAIT_READY = DEPLOY / "systemd" / "benchd-wait-ready"


def missing(reason):
    """Skip by hand; fail under ctest (BENCHD_DEPLOY_STRICT), which provides
    the binaries and whose set-up installs the tools."""
    if os.environ.get("BENCHD_DEPLOY_STRICT"):
        pytest.fail(reason)
    pytest.skip(reason)


def bin_dir():
    for candidate in (os.environ.get("BENCHD_BIN_DIR"), ROOT / "build" / "bin"):
        if candidate and (pathlib.Path(candidate) / "benchd").exists():
            return pathlib.Path(candidate)
    return None


def test_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        missing("systemd-analyze not found (Debian: systemd)")
    binaries = bin_dir()
    if binaries is None:
        missing("no benchd binary: set BENCHD_BIN_DIR (ctest does)")
    # verify checks that each command exists: point the install paths at the
    # build and at this checkout.
    text = UNIT.read_text()
    assert "/usr/local/bin/benchd " in text and "/usr/local/lib/benchd/benchd-wait-ready" in text
    text = text.replace("/usr/local/bin/benchd ", f"{binaries}/benchd ")
    text = text.replace("/usr/local/lib/benchd/benchd-wait-ready", str(WAIT_READY))
    unit = tmp_path / "benchd.service"
    unit.write_text(text)
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), \
        result.stdout + result.stderr
    # And it does object: an unknown key is reported.
    unit.write_text(text.replace("[Service]\n", "[Service]\nKillModes=mixed\n", 1))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert "KillModes" in result.stdout + result.stderr


def unit_settings():
    settings = {}
    for line in UNIT.read_text().replace("\\\n", " ").splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_unit_and_env_file_agree():
    env = dict(line.split("=", 1) for line in ENV_FILE.read_text().splitlines()
               if line and not line.startswith("#"))
    settings = unit_settings()
    used = set(re.findall(r"\$\{?(BENCHD_[A-Z_]+)", " ".join(settings["ExecStart"]
                                                             + settings["ExecStartPost"])))
    assert used == set(env), (used, set(env))
    assert env["BENCHD_DATA_DIR"] == "/var/lib/" + settings["StateDirectory"][0]
    assert env["BENCHD_DATA_DIR"] in settings["ReadWritePaths"]
    # SIGTERM to benchd alone (it stops its workers after the drain), and
    # time for the drain and the shutdown before SIGKILL.
    assert settings["KillMode"] == ["mixed"]
    assert int(settings["TimeoutStopSec"][0]) >= int(env["BENCHD_STOP_GRACE"]) + SERVER_SHUTDOWN_S + 10
    assert settings["Type"] == ["exec"]
    assert settings["PrivateDevices"] == ["no"] and settings["DevicePolicy"] == ["closed"]
    assert "char-nvidia-frontend rw" in settings["DeviceAllow"]
    assert "char-nvidia-uvm rw" in settings["DeviceAllow"]


def test_benchd_does_not_notify():
    """Type=exec is right only while benchd does not call sd_notify."""
    sources = "".join(p.read_text() for p in (ROOT / "server").glob("*.cc"))
    assert "sd_notify" not in sources and "NOTIFY_SOCKET" not in sources


def test_wait_ready(tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        # A file from another (killed) benchd is not taken for this one.
        (tmp_path / "endpoints.json").write_text('{"grpc":"127.0.0.1:7531","pid":1}\n')
        stale = subprocess.run([str(WAIT_READY), str(tmp_path), str(sleeper.pid), "1"],
                               capture_output=True, text=True)
        assert stale.returncode == 1 and "wrote no" in stale.stderr
        (tmp_path / "endpoints.json").write_text(
            '{"devices":["cpu:0"],"grpc":"127.0.0.1:7531","metrics":"127.0.0.1:9531",'
            f'"pid":{sleeper.pid}}}\n')
        ready = subprocess.run([str(WAIT_READY), str(tmp_path), str(sleeper.pid), "5"],
                               capture_output=True, text=True)
        assert ready.returncode == 0, ready.stderr
    finally:
        sleeper.kill()
        sleeper.wait()
    gone = subprocess.run([str(WAIT_READY), str(tmp_path / "none"), str(sleeper.pid), "5"],
                          capture_output=True, text=True)
    assert gone.returncode == 1 and "exited" in gone.stderr


# --- benchd-health

def load_health():
    import importlib.machinery
    import importlib.util
    path = DEPLOY / "container" / "benchd-health"
    loader = importlib.machinery.SourceFileLoader("benchd_health", str(path))
    spec = importlib.util.spec_from_loader("benchd_health", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.mark.parametrize("service", ["", "benchd.v1.Bench", "benchd.v1.Bench/cuda:0", "x" * 300])
def test_health_request_encoding(service):
    from grpc_health.v1 import health_pb2
    health = load_health()
    assert health.encode_request(service) == \
        health_pb2.HealthCheckRequest(service=service).SerializeToString()


@pytest.mark.parametrize("status", [0, 1, 2, 3])
def test_health_response_decoding(status):
    from grpc_health.v1 import health_pb2
    health = load_health()
    wire = health_pb2.HealthCheckResponse(status=status).SerializeToString()
    assert health.decode_status(wire) == status


# --- Containerfile

CONTAINERFILE = DEPLOY / "container" / "Containerfile"
# setup.sh packages that only the tests, CI or the developer need.
# What setup.sh installs for the tests alone: test frameworks, the real
# Prometheus, systemd-analyze, and the Slurm cluster tests/cluster starts.
NOT_FOR_THE_IMAGE = {"libgtest-dev", "libgmock-dev", "clang-format", "git", "prometheus", "systemd",
                     "munge", "slurmctld", "slurmd", "slurm-client", "iproute2", "util-linux",
                     "shellcheck"}


def stages():
    out, current = {}, None
    for line in CONTAINERFILE.read_text().replace("\\\n", " ").splitlines():
        match = re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line)
        if match:
            current = match.group(2)
            out[current] = {"from": match.group(1), "lines": []}
        elif current and line.strip() and not line.startswith("#"):
            out[current]["lines"].append(line.strip())
    return out


def apt_packages(lines):
    packages = set()
    for line in lines:
        match = re.search(r"apt-get install -y -q --no-install-recommends (.*?)(&&|$)", line)
        if match:
            packages |= set(match.group(1).split())
    return packages


def test_one_ignore_file_that_docker_and_podman_both_read():
    """Docker ignores .containerignore and sent ~8 GB of context; Podman reads
    .dockerignore when there is no .containerignore: one .dockerignore serves
    both, and it leaves out what this checkout makes (builds, venvs, bundles)."""
    assert not (ROOT / ".containerignore").exists(), \
        ".containerignore would shadow .dockerignore for Podman only"
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for made in ("build*", ".venv*", ".gpu-debs"):
        assert made in patterns, made


def test_containerfile_stages():
    found = stages()
    assert list(found) == ["build", "runtime"]
    assert found["build"]["from"].endswith("debian:12")
    assert found["runtime"]["from"].endswith("debian:12-slim")
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    pkgs = set(re.search(r'PKGS="(.*?)"', setup, re.S).group(1).split())
    missing = pkgs - NOT_FOR_THE_IMAGE - apt_packages(found["build"]["lines"])
    assert not missing, f"build stage lacks setup.sh's {missing}"
    runtime = found["runtime"]["lines"]
    build = " ".join(found["build"]["lines"])
    # The image holds what `cmake --install` installs (tests/install runs such
    # an install with the checkout hidden): the programs, benchd-health and
    # benchd-cluster-run (deploy/CMakeLists.txt), LibTorch under lib/benchd.
    assert "DESTDIR=/install cmake --install /build --prefix /usr/local" in build
    copies = " ".join(line for line in runtime if line.startswith("COPY"))
    assert copies == "COPY --from=build /install/usr/local /usr/local", copies
    assert os.access(CLUSTER_RUN, os.X_OK)
    install_rules = (ROOT / "deploy" / "CMakeLists.txt").read_text()
    assert "container/benchd-health container/benchd-cluster-run" in install_rules
    assert "benchd-worker --help" in " ".join(runtime)
    assert "python3-grpcio" in apt_packages(runtime)  # benchd-health
    # nvcc for the worker's kernels: a toolkit of the same CUDA as torch's wheels.
    assert "nvidia-cuda-nvcc==13.0." in build and "/usr/local/cuda/bin/nvcc --version" in build
    assert any(line.startswith("USER 10001") for line in runtime)
    # The DaemonSet runs as the image's user.
    pod = pod_specs(one(render_base()[1], "DaemonSet"))[0]
    assert pod["securityContext"]["runAsUser"] == 10001


def test_runtime_stage_has_the_binaries_debian_libraries():
    """Every Debian library the built binaries load (ldd) belongs to a package
    the runtime stage installs or one they pull in."""
    binaries = bin_dir()
    if binaries is None or not shutil.which("dpkg") or not shutil.which("apt-cache"):
        missing("needs built binaries (BENCHD_BIN_DIR), dpkg and apt-cache")
    programs = [str(binaries / b) for b in ("benchd", "benchctl", "benchd-worker")
                if (binaries / b).exists()]
    ldd = subprocess.run(["ldd", *programs], capture_output=True, text=True, check=True).stdout
    paths = set(re.findall(r"=> (/\S+)", ldd))
    # LibTorch and CUDA come from the wheels, not from Debian. A CUDA library
    # may be found through a link outside the toolkit (CI's /usr/local/lib has
    # libcudart.so.13 -> /usr/local/cuda-13.0/lib/...): judge where it really is.
    from_wheels = re.compile(r"torch/lib|/nvidia/|/cuda")
    debian = {p for p in paths
              if not from_wheels.search(p) and not from_wheels.search(os.path.realpath(p))}
    assert debian, ldd
    # dpkg -S PATH...: "package:arch: path" per path it knows (Debian's
    # libraries may be found through /lib, a link to /usr/lib: try both).
    candidates = sorted(debian | {os.path.realpath(p) for p in debian})
    listing = subprocess.run(["dpkg", "-S", *candidates], capture_output=True, text=True).stdout
    owned = {}
    for line in listing.splitlines():
        package, _, path = line.partition(": ")
        owned[path] = package.split(":")[0]
    owners = set()
    for path in debian:
        package = owned.get(path) or owned.get(os.path.realpath(path))
        assert package, f"no Debian package owns {path}"
        owners.add(package)
    runtime = sorted(apt_packages(stages()["runtime"]["lines"]))
    depends = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                              "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
                              *runtime], capture_output=True, text=True, check=True).stdout
    closure = {line.strip() for line in depends.splitlines() if not line.startswith(" ")}
    assert owners <= closure, f"the runtime stage lacks {sorted(owners - closure)}"


# --- Apptainer definition (deploy/container/benchd.def)
#
# Apptainer is not packaged for Debian 12 and cannot be installed here, so the
# definition is checked, not built: parsed as Apptainer's own parser reads it
# (pkg/build/types/parser/deffile.go, 1.x), and compared with the Containerfile
# command by command, so the two images cannot drift apart.

APPTAINER_DEF = DEPLOY / "container" / "benchd.def"
# deffile.go's validSections and appSections: any other fails the build.
APPTAINER_SECTIONS = {"help", "setup", "files", "labels", "environment", "pre", "post", "runscript",
                      "test", "startscript", "arguments"}
APPTAINER_APP_SECTIONS = {"appinstall", "applabels", "appfiles", "appenv", "apphelp", "apprun",
                          "apptest", "appstart"}
# The Containerfile's commands that have no place in an Apptainer image: a
# container runs as whoever starts it, so there is no benchd user to make.
DOCKER_ONLY_COMMANDS = ("groupadd ", "useradd ", "install -d -o benchd ")


def apptainer_stages(text):
    """A definition file as Apptainer parses it: stages start at each line
    beginning "Bootstrap:"; a stage's header is the "Key: value" lines before
    its first section (# comments skipped); a section starts at any line whose
    first word begins with % and runs to the next one (a repeated section is
    appended to the first); %files and %labels lines skip # comments.
    Returns {stage name: {"header": {...}, "sections": {"post": text, ...},
    "files": {"": [(src, dst)], "from build": [...]}, "labels": {...}}}."""
    starts = [m.start() for m in re.finditer(r"(?mi)^bootstrap:", text)]
    assert starts, "no Bootstrap: header"
    preamble = text[:starts[0]]
    assert all(not line.strip() or line.lstrip().startswith("#")
               for line in preamble.splitlines()), "only comments may come before Bootstrap:"
    stages = {}
    for begin, end in zip(starts, starts[1:] + [len(text)]):
        header, sections, files, order, current = {}, {}, {}, [], None
        for line in text[begin:end].splitlines():
            words = line.split()
            if words and words[0].startswith("%"):
                name, _, args = line.strip()[1:].partition(" ")
                name = name.lower()
                assert name in APPTAINER_SECTIONS | APPTAINER_APP_SECTIONS, f"unknown section %{name}"
                current = (name, args.strip())
                sections.setdefault(current, [])
                order.append(current)
            elif current is None:
                stripped = line.split("#")[0].strip()
                if stripped:
                    key, sep, value = stripped.partition(":")
                    assert sep, f"header line without a value: {line!r}"
                    header[key.strip().lower()] = value.strip()
            else:
                sections[current].append(line)
        assert set(header) <= {"bootstrap", "from", "stage"}, header
        labels = {}
        for (name, args), lines in sections.items():
            entries = [line.strip() for line in lines
                       if line.strip() and not line.strip().startswith("#")]
            if name == "files":
                files[args] = [tuple(e.split()) if len(e.split()) == 2 else (e, e) for e in entries]
                assert all(len(e.split()) <= 2 for e in entries), entries
            elif name == "labels":
                labels.update(e.split(" ", 1) for e in entries)
        scripts = {(f"{name} {args}" if name in APPTAINER_APP_SECTIONS else name): "\n".join(lines)
                   for (name, args), lines in sections.items() if name != "files"}
        stage = header.get("stage", f"stage{len(stages)}")
        assert stage not in stages, f"two stages named {stage}"
        stages[stage] = {"header": header, "sections": scripts, "files": files, "labels": labels}
    return stages


def shell_commands(script):
    """A shell script's (or RUN's) simple commands, for comparing two recipes:
    line continuations joined, comment lines dropped, split at ; and &&,
    whitespace collapsed. Both sides are split the same way, so a ; inside
    quotes splits both alike."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"&&|;", line):
            part = " ".join(part.split())
            if part:
                commands.append(part)
    return commands


def containerfile_instructions(text):
    """The Containerfile's instructions per stage: [(INSTRUCTION, arguments)],
    continuations joined, comment lines dropped."""
    out, current = {}, None
    for line in text.replace("\\\n", " ").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, rest = line.strip().partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            image, _, current = rest.partition(" AS ")
            out[current.strip()] = [("FROM", image.strip())]
        else:
            out[current].append((instruction, " ".join(rest.split())))
    return out


def docker_image(reference):
    """docker.io/library/debian:12 and debian:12 name the same image."""
    return re.sub(r"^(docker\.io/)?(library/)?", "", reference)


def apptainer_drift(definition, containerfile):
    """Where benchd.def and the Containerfile disagree: a list of sentences,
    empty when the definition builds the same image as Apptainer allows."""
    problems = []
    defs = apptainer_stages(definition)
    docker = containerfile_instructions(containerfile)
    if list(defs) != list(docker):
        return [f"stages {list(defs)} here, {list(docker)} in the Containerfile"]
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    for name, instructions in docker.items():
        stage = defs[name]
        post = shell_commands(stage["sections"].get("post", ""))
        if stage["header"].get("bootstrap") != "docker":
            problems.append(f"{name}: Bootstrap {stage['header'].get('bootstrap')}, not docker")
        if docker_image(stage["header"].get("from", "")) != docker_image(instructions[0][1]):
            problems.append(f"{name}: From {stage['header'].get('from')}, not {instructions[0][1]}")
        for instruction, args in instructions[1:]:
            if instruction == "RUN":
                for command in shell_commands(args):
                    if command not in post and not command.startswith(DOCKER_ONLY_COMMANDS):
                        problems.append(f"{name}: %post lacks `{command}`")
            elif instruction == "ARG":
                if " ".join(args.split()) not in post:
                    problems.append(f"{name}: %post lacks the ARG `{args}`")
            elif instruction == "ENV":
                if f"export {args}" not in post:
                    problems.append(f"{name}: %post lacks `export {args}`")
            elif instruction == "COPY" and args == ". /src":
                # The build context as Docker sends it: the tracked top-level
                # entries (.dockerignore drops the untracked builds and venvs);
                # the dotfiles (.gitignore, .clang-format ...) CMake never reads.
                assert tracked.returncode == 0, tracked.stderr
                top = {p.split("/")[0] for p in tracked.stdout.splitlines() if not p.startswith(".")}
                copied = dict(stage["files"].get("", []))
                if set(copied) != top:
                    problems.append(f"{name}: %files copies {sorted(copied)}, the checkout has {sorted(top)}")
                problems += [f"{name}: %files puts {src} at {dst}" for src, dst in copied.items()
                             if dst != f"/src/{src}"]
            elif instruction == "COPY" and args.startswith("--from="):
                source, src, dst = args.split()
                # A stage copy into an existing directory keeps the source's
                # name (apptainer's CopyFromStage): /install/usr/local into
                # /usr is the Containerfile's copy to /usr/local.
                want = [(src, os.path.dirname(dst))]
                got = stage["files"].get(f"from {source.removeprefix('--from=')}")
                if got != want:
                    problems.append(f"{name}: %files from ... is {got}, not {want}")
            elif instruction in ("USER", "EXPOSE"):
                pass  # Apptainer: the caller's user, the host's network
            elif instruction in ("ENTRYPOINT", "CMD"):
                pass  # below, against %runscript and %startscript
            else:
                problems.append(f"{name}: no Apptainer counterpart checked for {instruction}")
        packages = apt_packages([f"RUN {a}" for i, a in instructions if i == "RUN"])
        if apt_packages(post) != packages:
            problems.append(f"{name}: apt packages {sorted(apt_packages(post) ^ packages)} differ")
    # The entry point: ENTRYPOINT with CMD as the default arguments.
    final = docker[list(docker)[-1]]
    entry = json.loads(next(a for i, a in final if i == "ENTRYPOINT"))
    default = json.loads(next(a for i, a in final if i == "CMD"))
    image = defs[list(defs)[-1]]
    for section in ("runscript", "startscript"):
        commands = shell_commands(image["sections"].get(section, ""))
        if f'exec {" ".join(entry)} "$@"' not in commands:
            problems.append(f"%{section} does not exec {entry}")
        if f"set -- {' '.join(default)}" not in commands:
            problems.append(f"%{section} lacks the default arguments {default}")
    for arg in default:
        if arg.startswith("--data-dir="):
            directory = arg.split("=", 1)[1]
            if f"install -d -m 0755 {directory}" not in shell_commands(image["sections"]["post"]):
                problems.append(f"the image has no mount point {directory} for the data dir")
    return problems


def test_apptainer_definition_parses():
    """The sections Apptainer knows, two stages as the Containerfile's, the
    runtime image's metadata and entry points."""
    stages = apptainer_stages(APPTAINER_DEF.read_text())
    assert list(stages) == ["build", "runtime"]
    runtime = stages["runtime"]
    assert {"post", "environment", "runscript", "startscript", "test", "labels", "help",
            "apprun health"} <= set(runtime["sections"])
    version = re.search(r"project\(benchd VERSION (\S+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    assert runtime["labels"]["org.opencontainers.image.version"] == version
    assert "exec /usr/local/bin/benchd-health \"$@\"" in shell_commands(runtime["sections"]["apprun health"])
    # Every source %files copies from the host exists (relative to the repository root).
    for src, _ in stages["build"]["files"][""]:
        assert (ROOT / src).exists(), src
    # The scripts Apptainer runs (/bin/sh: dash on Debian) parse.
    for stage in stages.values():
        for name, script in stage["sections"].items():
            if name in ("post", "runscript", "startscript", "test", "environment") or \
                    name.startswith("apprun"):
                result = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True)
                assert result.returncode == 0, (name, result.stderr)


def test_apptainer_definition_matches_the_containerfile():
    assert apptainer_drift(APPTAINER_DEF.read_text(), CONTAINERFILE.read_text()) == []


@pytest.mark.parametrize("change", [
    ("libfmt9 ", ""),                                     # a runtime package dropped
    ("TORCH_VERSION=2.11.0", "TORCH_VERSION=2.10.0"),     # another torch
    ("-DBENCHD_BUILD_TESTS=OFF", ""),                     # a configure flag lost
    ("    worker /src/worker\n", ""),                     # a source folder not copied
    ("/install/usr/local /usr\n", "/install/usr/local /usr/local\n"),   # /usr/local/local
    ("exec /usr/local/bin/benchd \"$@\"", "exec /usr/local/bin/benchctl \"$@\""),
])
def test_apptainer_drift_is_caught(change):
    """Each way the two recipes could drift is reported (so the test above can fail)."""
    old, new = change
    text = APPTAINER_DEF.read_text()
    assert old in text, old
    assert apptainer_drift(text.replace(old, new, 1), CONTAINERFILE.read_text()) != []


def test_apptainer_drift_sees_a_new_containerfile_command():
    containerfile = CONTAINERFILE.read_text().replace(
        "&& bash -n /usr/local/bin/benchd-cluster-run",
        "&& bash -n /usr/local/bin/benchd-cluster-run && ldconfig")
    assert apptainer_drift(APPTAINER_DEF.read_text(), containerfile) == ["runtime: %post lacks `ldconfig`"]


def run_def_section(tmp_path, section, args=(), ldd_output=""):
    """One script section of the runtime stage, run by sh as Apptainer runs
    it, with its programs and data dir moved under tmp_path: stand-ins for
    benchd (records its arguments) and ldd (prints ldd_output)."""
    script = apptainer_stages(APPTAINER_DEF.read_text())["runtime"]["sections"][section]
    bin_dir, data = tmp_path / "bin", tmp_path / "data"
    bin_dir.mkdir(exist_ok=True)
    for name in ("benchd", "benchd-worker", "benchctl"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/{name}.args\n')
        (bin_dir / name).chmod(0o755)
    (bin_dir / "ldd").write_text(f"#!/bin/sh\nprintf '%s' '{ldd_output}'\n")
    (bin_dir / "ldd").chmod(0o755)
    script = script.replace("/usr/local/bin/", f"{bin_dir}/").replace("/var/lib/benchd", str(data))
    return subprocess.run(["sh", "-c", script, "runscript", *args], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})


@pytest.mark.parametrize("section", ["runscript", "startscript"])
def test_apptainer_entry_points_run_benchd(tmp_path, section):
    """No arguments: benchd on the image's data dir (the Containerfile's CMD);
    arguments replace it, as after the image name of `docker run`."""
    (tmp_path / "data").mkdir()
    result = run_def_section(tmp_path, section)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "benchd.args").read_text().split() == [f"--data-dir={tmp_path}/data"]
    result = run_def_section(tmp_path, section, ["--device", "cpu:0", "--data-dir=/scratch/x"])
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "benchd.args").read_text().split() == ["--device", "cpu:0", "--data-dir=/scratch/x"]


def test_apptainer_runscript_asks_for_a_bound_data_dir(tmp_path):
    """The image is read-only: with nothing bound at the data dir the
    runscript says how to bind one instead of letting benchd fail on it."""
    result = run_def_section(tmp_path, "runscript")  # no data dir: not writable
    assert result.returncode == 2 and "--bind DIR:" in result.stderr
    assert not (tmp_path / "benchd.args").exists()


def test_apptainer_test_section(tmp_path):
    """%test runs at the end of the build (no driver there): libcuda.so alone
    missing passes with a note; any other missing library fails."""
    cuda = "\tlibcuda.so.1 => not found\n"
    result = run_def_section(tmp_path, "test", ldd_output=cuda)
    assert result.returncode == 0 and "run with --nv" in result.stdout, result.stdout + result.stderr
    result = run_def_section(tmp_path, "test", ldd_output=cuda + "\tlibfmt.so.9 => not found\n")
    assert result.returncode == 1 and "libfmt.so.9" in result.stdout
    result = run_def_section(tmp_path, "test", ldd_output="\tlibcuda.so.1 => /lib/libcuda.so.1\n")
    assert result.returncode == 0 and "every library found" in result.stdout


def test_apptainer_build_stage_has_setup_sh_packages():
    """As test_containerfile_stages checks the Containerfile: the build stage
    installs what scripts/setup.sh installs for the build."""
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    pkgs = set(re.search(r'PKGS="(.*?)"', setup, re.S).group(1).split())
    post = shell_commands(apptainer_stages(APPTAINER_DEF.read_text())["build"]["sections"]["post"])
    missing_packages = pkgs - NOT_FOR_THE_IMAGE - apt_packages(post)
    assert not missing_packages, f"benchd.def's build stage lacks setup.sh's {missing_packages}"
