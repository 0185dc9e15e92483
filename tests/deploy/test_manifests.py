"""deploy/: the manifests, the unit and the image recipe, checked without a
cluster, a systemd PID 1 or a container build (ctest deploy.manifests).

- yamllint over deploy/ (deploy/.yamllint);
- the Kubernetes base rendered as `kustomize build` would render it (its
  resources, namespace and image tag: the only transforms it uses; kustomize is
  not in Debian) and every object validated against the Kubernetes 1.37 API
  schemas (kubernetes-validate, strict: unknown fields fail). The ServiceMonitor
  is a CRD those schemas lack: it gets the structural check below;
- the daemon's own rules on the DaemonSet's flags (TLS and an auth file off
  loopback, --insecure for /metrics off loopback), the names tying the
  Service, ServiceMonitor and probes to the container, the grace periods;
- `systemd-analyze verify` of benchd.service with no output at all (it exits
  0 on unknown keys and only prints them), and benchd-wait-ready against a
  real process;
- benchd-health's hand-made health messages against grpcio-health-checking's;
- the Containerfile's stages against scripts/setup.sh's package list, and its
  runtime packages against the Debian libraries the built binaries load.
"""
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
STOP_GRACE_S = 10           # benchd's --stop-grace default (server/config.h)
SERVER_SHUTDOWN_S = 5       # server->Shutdown deadline in server/main.cc
NAMESPACED_KINDS = {"DaemonSet", "Service", "ServiceMonitor", "NetworkPolicy", "ConfigMap"}


def test_yamllint():
    result = subprocess.run([sys.executable, "-m", "yamllint", "--strict", "-c",
                             str(DEPLOY / ".yamllint"), str(DEPLOY)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def render_base():
    """kustomize build deploy/kubernetes/base, for the transforms it uses."""
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    used = set(kustomization) - {"apiVersion", "kind"}
    # A new transform (patches, labels, generators ...) needs rendering here first.
    assert used <= {"namespace", "resources", "images"}, used
    images = {i["name"]: i for i in kustomization.get("images", [])}
    objects = []
    for resource in kustomization["resources"]:
        for obj in yaml.safe_load_all((BASE / resource).read_text()):
            if obj["kind"] in NAMESPACED_KINDS:
                obj["metadata"]["namespace"] = kustomization["namespace"]
            for pod in pod_specs(obj):
                for container in pod["containers"]:
                    name = container["image"].split(":")[0]
                    if name in images:
                        image = images[name]
                        container["image"] = f"{image.get('newName', name)}:{image['newTag']}"
            objects.append(obj)
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
        if obj["kind"] == "ServiceMonitor":
            continue  # a CRD: test_servicemonitor_structure
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
    container = pod["containers"][0]
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
    # The auth file must not be group/other-writable (server/auth.cc).
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
    kustomization = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    assert set(kustomization) - {"apiVersion", "kind"} == {"resources", "patches"}
    assert kustomization["resources"] == ["../../base"]
    objects = render_base()[1]
    for patch in kustomization["patches"]:
        targets = [o for o in objects if o["kind"] == patch["target"]["kind"]
                   and o["metadata"]["name"] == patch["target"]["name"]]
        assert len(targets) == 1, patch["target"]
        for op in yaml.safe_load((OVERLAY / patch["path"]).read_text()):
            assert op["op"] in ("replace", "add"), op["op"]
            *parents, last = op["path"].lstrip("/").split("/")
            node = targets[0]
            for key in parents:
                node = node[int(key)] if isinstance(node, list) else node[key]
            if op["op"] == "replace":
                assert last in node, op["path"]  # replace needs the path to exist
            node[last] = op["value"]
    return objects


def test_overlay_grpc_probe_tls():
    import kubernetes_validate

    objects = render_overlay()
    for obj in objects:
        if obj["kind"] != "ServiceMonitor":
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
NOT_FOR_THE_IMAGE = {"libgtest-dev", "libgmock-dev", "clang-format", "git", "prometheus", "systemd"}


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
    copies = " ".join(line for line in runtime if line.startswith("COPY"))
    for binary in ("benchd", "benchd-worker", "benchctl"):
        assert f"/build/bin/{binary}" in copies
    assert "deploy/container/benchd-health" in copies
    assert "torch/lib" in copies and "${SITE}/nvidia" in copies
    # The worker's RUNPATH names /usr/local/cuda/lib for its own libcudart.so.13.
    assert "ln -s ${SITE}/nvidia/cu13/lib /usr/local/cuda/lib" in " ".join(runtime)
    assert "benchd-worker --help" in " ".join(runtime)
    # The venv path is the same in both stages (the worker's RUNPATH).
    site = re.search(r"ARG SITE=(\S+)", " ".join(runtime)).group(1)
    venv = re.search(r"python3 -m venv (\S+)", " ".join(found["build"]["lines"])).group(1)
    assert site.startswith(venv + "/lib/python3.11/site-packages")
    assert "python3-grpcio" in apt_packages(runtime)  # benchd-health
    # nvcc for the worker's kernels: a toolkit of the same CUDA as torch's wheels.
    build = " ".join(found["build"]["lines"])
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
