"""benchctl's side of "who gets in" (issue 18), end to end against real
daemons with TLS, mTLS and an auth file made at test time: credentials by
flags, by environment and by the client config file; what the user sees when
they are missing, wrong or not allowed; the token kept off plaintext to other
hosts; TLS mismatches said as such. Tokens come from `benchctl token create`,
certificates from tls_certs.py. test_auth.py checks the daemon itself with
Python grpcio."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import BIN, Daemon
from tls_certs import make_certs

TINY = ["--preset", "tiny", "--batch-size", "1", "--context-length", "16", "--steps", "1",
        "--warmup-steps", "0"]


def benchctl(*args, env=None, timeout=60):
    """benchctl with only the BENCHD_* variables given here (none of the
    caller's, and no client config file unless BENCHD_CLIENT_CONFIG is given)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("BENCHD_")}
    full["BENCHD_CLIENT_CONFIG"] = "/nonexistent/benchd-client.json"
    full.update(env or {})
    return subprocess.run([os.path.join(BIN, "benchctl"), *args], capture_output=True, text=True,
                          timeout=timeout, env=full)


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return r


def node_security(r):
    return json.loads(ok(r).stdout)["security"]


def make_token(directory, role, name):
    """A token from `benchctl token create`, saved 0600 as benchctl would be
    told to keep it; returns (token file, auth-file line)."""
    r = ok(benchctl("token", "create", "--role", role, "--name", name))
    token = r.stdout.strip()
    assert r.stdout == token + "\n" and token.startswith("benchd_")
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"{role} {name} sha256:") and token not in r.stderr
    # `token hash` gives the same hash for the token on stdin.
    hashed = ok(subprocess.run([os.path.join(BIN, "benchctl"), "token", "hash"],
                               input=token + "\n", capture_output=True, text=True, timeout=10))
    assert hashed.stdout == line.split()[2] + "\n"
    path = os.path.join(directory, f"{name}.token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return path, line


def write_auth_file(path, lines):
    with open(path, "w") as f:
        f.write("# made by test_client_credentials.py\n" + "\n".join(lines) + "\n")
    os.chmod(path, 0o600)


@pytest.fixture(scope="module")
def setup():
    """Certificates, tokens for alice (submit), grafana (read), and ops (admin),
    and an auth file naming them (plus ops and alice by certificate subject)."""
    d = tempfile.mkdtemp(prefix="benchctl-creds-")
    certs = make_certs(os.path.join(d, "certs"))
    tokens, lines = {}, []
    for role, name in [("submit", "alice"), ("read", "grafana"), ("admin", "ops")]:
        tokens[name], line = make_token(d, role, name)
        lines.append(line)
    lines += ["admin ops-cert subject:CN=ops,O=benchd test",
              "submit alice-cert subject:CN=alice,O=benchd test"]
    auth = os.path.join(d, "auth")
    write_auth_file(auth, lines)
    yield {"dir": d, "certs": certs, "tokens": tokens, "auth": auth}
    shutil.rmtree(d, ignore_errors=True)


def started(extra):
    data = tempfile.mkdtemp(prefix="benchctl-creds-d-")
    return Daemon(data, extra).start()


def stopped(d):
    d.stop()
    shutil.rmtree(d.data_dir, ignore_errors=True)


def port_of(d):
    return d.address.rsplit(":", 1)[1]


@pytest.fixture(scope="module")
def tls(setup):
    """TLS (no client certificates) and the auth file."""
    c = setup["certs"]
    d = started(["--tls-cert", c.server_cert, "--tls-key", c.server_key,
                 "--auth-file", setup["auth"]])
    yield d
    stopped(d)


@pytest.fixture(scope="module")
def mtls(setup):
    """mTLS: every client shows a certificate signed by the CA."""
    c = setup["certs"]
    d = started(["--tls-cert", c.server_cert, "--tls-key", c.server_key,
                 "--tls-client-ca", c.ca_cert, "--auth-file", setup["auth"]])
    yield d
    stopped(d)


@pytest.fixture(scope="module")
def plain(setup):
    """Plaintext on loopback, with the auth file."""
    d = started(["--auth-file", setup["auth"]])
    yield d
    stopped(d)


# ------------------------------------------------------------ the right credentials pass


def test_flags_tls_ca_and_token_file(tls, setup):
    t, c = setup["tokens"], setup["certs"]
    # localhost is in the daemon's certificate; 127.0.0.1 too.
    for host in ["localhost", "127.0.0.1"]:
        s = node_security(benchctl("--address", f"{host}:{port_of(tls)}", "--tls-ca", c.ca_cert,
                                   "--token-file", t["alice"], "node", "--json"))
        assert s["tls"] and s["tokens"] and not s["clientCertificates"]
        assert (s["caller"], s["callerRole"]) == ("alice", "ROLE_SUBMIT")
    common = ["--address", f"localhost:{port_of(tls)}", "--tls-ca", c.ca_cert]
    job = ok(benchctl(*common, "--token-file", t["alice"], "submit", "benchmark", *TINY)).stdout
    job = job.strip()
    got = json.loads(ok(benchctl(*common, "--token-file", t["grafana"], "get", job,
                                 "--json")).stdout)
    assert got["submitter"] == "alice"
    listed = ok(benchctl(*common, "--token-file", t["grafana"], "list", "--json")).stdout
    assert job in [j["id"] for j in json.loads(listed)["jobs"]]
    # Global flags after the subcommand work too.
    s = node_security(benchctl("node", "--json", *common, "--token-file", t["ops"]))
    assert (s["caller"], s["callerRole"]) == ("ops", "ROLE_ADMIN")


def test_environment(tls, setup):
    t, c = setup["tokens"], setup["certs"]
    env = {"BENCHD_ADDRESS": f"localhost:{port_of(tls)}", "BENCHD_TLS_CA": c.ca_cert,
           "BENCHD_TOKEN": open(t["alice"]).read().strip()}
    s = node_security(benchctl("node", "--json", env=env))
    assert (s["caller"], s["callerRole"]) == ("alice", "ROLE_SUBMIT")
    env.pop("BENCHD_TOKEN")
    env["BENCHD_TOKEN_FILE"] = t["grafana"]
    assert node_security(benchctl("node", "--json", env=env))["caller"] == "grafana"
    # A flag beats the environment.
    s = node_security(benchctl("--token-file", t["ops"], "node", "--json", env=env))
    assert s["caller"] == "ops"


def test_client_config_file(tls, setup, tmp_path):
    t, c = setup["tokens"], setup["certs"]
    shutil.copy(c.ca_cert, tmp_path / "ca.pem")
    shutil.copy(t["grafana"], tmp_path / "grafana.token")
    config = tmp_path / "client.json"
    # Relative paths are relative to the file's folder, not the working dir.
    config.write_text(json.dumps({"address": f"localhost:{port_of(tls)}", "tls_ca": "ca.pem",
                                  "token_file": "grafana.token"}))
    env = {"BENCHD_CLIENT_CONFIG": str(config)}
    s = node_security(benchctl("node", "--json", env=env))
    assert (s["caller"], s["callerRole"]) == ("grafana", "ROLE_READ")
    # The default location: ${XDG_CONFIG_HOME}/benchd/client.json.
    (tmp_path / "xdg" / "benchd").mkdir(parents=True)
    shutil.copy(config, tmp_path / "xdg" / "benchd" / "client.json")
    shutil.copy(c.ca_cert, tmp_path / "xdg" / "benchd" / "ca.pem")
    shutil.copy(t["alice"], tmp_path / "xdg" / "benchd" / "grafana.token")
    r = subprocess.run([os.path.join(BIN, "benchctl"), "node", "--json"], capture_output=True,
                       text=True, timeout=60,
                       env={**{k: v for k, v in os.environ.items() if not k.startswith("BENCHD_")},
                            "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert node_security(r)["caller"] == "alice"
    # The environment beats the file.
    env["BENCHD_TOKEN_FILE"] = t["ops"]
    assert node_security(benchctl("node", "--json", env=env))["caller"] == "ops"


def test_client_certificate(mtls, setup):
    c = setup["certs"]
    common = ["--address", f"localhost:{port_of(mtls)}", "--tls-ca", c.ca_cert]
    cert, key = c.clients["ops"]
    s = node_security(benchctl(*common, "--tls-cert", cert, "--tls-key", key, "node", "--json"))
    assert s["clientCertificates"] and (s["caller"], s["callerRole"]) == ("ops-cert", "ROLE_ADMIN")
    cert, key = c.clients["alice"]
    env = {"BENCHD_TLS_CERT": cert, "BENCHD_TLS_KEY": key}
    ok(benchctl(*common, "submit", "benchmark", *TINY, env=env))
    # alice's certificate gives submit, not admin.
    r = benchctl(*common, "evict", "--all", env=env)
    assert r.returncode == 4, r.stderr
    assert "PERMISSION_DENIED" in r.stderr and "admin" in r.stderr


def test_token_over_plaintext_to_loopback(plain, setup):
    t = setup["tokens"]
    s = node_security(benchctl("--address", plain.address, "--token-file", t["grafana"], "node",
                               "--json"))
    assert not s["tls"] and s["caller"] == "grafana"


# ------------------------------------------------------------ refusals


def test_no_token_is_unauthenticated(tls, plain, setup):
    c = setup["certs"]
    for args in [["--address", f"localhost:{port_of(tls)}", "--tls-ca", c.ca_cert],
                 ["--address", plain.address]]:
        r = benchctl(*args, "list")
        assert r.returncode == 4, r.stderr
        assert r.stderr.startswith("benchctl: UNAUTHENTICATED: "), r.stderr
        assert "benchctl sent no token" in r.stderr and "BENCHD_TOKEN" in r.stderr


def test_an_unknown_token_keeps_the_daemons_message(plain, setup, tmp_path):
    other, _ = make_token(str(tmp_path), "admin", "nobody")
    r = benchctl("--address", plain.address, "--token-file", other, "node")
    assert r.returncode == 4 and "UNAUTHENTICATED" in r.stderr, r.stderr
    assert "not in the daemon's auth file" in r.stderr
    assert "benchctl sent no token" not in r.stderr


def test_a_read_token_may_not_submit(tls, setup):
    t, c = setup["tokens"], setup["certs"]
    r = benchctl("--address", f"localhost:{port_of(tls)}", "--tls-ca", c.ca_cert, "--token-file",
                 t["grafana"], "submit", "benchmark", *TINY)
    assert r.returncode == 4, r.stderr
    assert "PERMISSION_DENIED" in r.stderr and "grafana" in r.stderr and "read" in r.stderr
    assert r.stdout == ""


def non_loopback_ip():
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    return next((a for a in out if ":" not in a and not a.startswith("127.")), None)


def test_no_token_in_plaintext_to_another_host(setup):
    ip = non_loopback_ip()
    if ip is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    d = started(["--listen", "0.0.0.0:0", "--metrics", "off", "--insecure",
                 "--auth-file", setup["auth"]])
    try:
        address = f"{ip}:{port_of(d)}"
        before = d.log().count("auth: refused")
        t = setup["tokens"]
        for env in [{"BENCHD_TOKEN_FILE": t["alice"]}, {"BENCHD_TOKEN": "benchd_x"}]:
            r = benchctl("--address", address, "node", env=env)
            assert r.returncode == 2, r.stderr
            assert "refusing to send the token" in r.stderr and address in r.stderr
            assert "--tls-ca" in r.stderr
        # Refused before any call: the daemon saw nothing (a call without a
        # token reaches it and is logged as refused).
        assert d.log().count("auth: refused") == before
        r = benchctl("--address", address, "node")
        assert r.returncode == 4 and "UNAUTHENTICATED" in r.stderr, r.stderr
    finally:
        stopped(d)


# ------------------------------------------------------------ TLS mismatches


def test_plaintext_client_against_tls(tls, mtls):
    for d in [tls, mtls]:
        r = benchctl("--address", d.address, "node", env={"BENCHD_TOKEN": "x"})
        assert r.returncode == 3, r.stderr
        assert f"TLS failed at {d.address}" in r.stderr and "--tls-ca" in r.stderr


def test_tls_client_against_plaintext(plain, setup):
    r = benchctl("--address", plain.address, "--tls-ca", setup["certs"].ca_cert, "node")
    assert r.returncode == 3, r.stderr
    assert f"TLS failed at {plain.address}" in r.stderr and "does not speak TLS" in r.stderr


def test_a_ca_that_did_not_sign_the_daemon(tls, setup):
    address = f"localhost:{port_of(tls)}"
    r = benchctl("--address", address, "--tls-ca", setup["certs"].other_ca_cert, "node")
    assert r.returncode == 3, r.stderr
    assert f"TLS failed at {address}" in r.stderr and "--tls-ca" in r.stderr


def test_server_name(tls, setup):
    c, t = setup["certs"], setup["tokens"]
    address = f"127.0.0.1:{port_of(tls)}"
    common = ["--address", address, "--tls-ca", c.ca_cert, "--token-file", t["grafana"]]
    node_security(benchctl(*common, "--tls-server-name", "localhost", "node", "--json"))
    r = benchctl(*common, "--tls-server-name", "benchd.example.org", "node")
    assert r.returncode == 3, r.stderr
    assert f"TLS failed at {address}" in r.stderr and "--tls-server-name" in r.stderr


@pytest.mark.parametrize("who", ["none", "mallory", "expired"])
def test_client_certificates_the_daemon_refuses(mtls, setup, who):
    c = setup["certs"]
    address = f"localhost:{port_of(mtls)}"
    args = ["--address", address, "--tls-ca", c.ca_cert]
    if who != "none":
        cert, key = {"mallory": c.mallory, "expired": c.expired}[who]
        args += ["--tls-cert", cert, "--tls-key", key]
    r = benchctl(*args, "node")
    assert r.returncode == 3, r.stderr
    assert f"TLS failed at {address}" in r.stderr and "--tls-cert" in r.stderr


# ------------------------------------------------------------ bad settings, no call made


def test_bad_settings_are_usage_errors_naming_the_setting(setup, tmp_path):
    c = setup["certs"]
    unused = "127.0.0.1:1"  # nothing listens: each must fail before any call
    cert, key = c.clients["alice"]
    r = benchctl("--address", unused, "--tls-cert", cert, "node")
    assert r.returncode == 2 and f"--tls-cert {cert} without a key" in r.stderr, r.stderr
    r = benchctl("--address", unused, "--tls-cert", cert, "--tls-key", c.clients["ops"][1], "node")
    assert r.returncode == 2 and "do not match" in r.stderr, r.stderr
    r = benchctl("--address", unused, "--tls-ca", str(tmp_path / "missing.pem"), "node")
    assert r.returncode == 2 and "missing.pem: cannot read the CA certificate" in r.stderr
    r = benchctl("--address", unused, "--token-file", str(tmp_path / "missing.token"), "node")
    assert r.returncode == 2 and "--token-file" in r.stderr and "missing.token" in r.stderr
    config = tmp_path / "client.json"
    config.write_text('{"address": "h:1", "tls_ca": "ca.pem",}')
    r = benchctl("node", env={"BENCHD_CLIENT_CONFIG": str(config)})
    assert r.returncode == 2 and f"client config {config} is not valid JSON" in r.stderr
    config.write_text('{"adress": "h:1"}')
    r = benchctl("node", env={"BENCHD_CLIENT_CONFIG": str(config)})
    assert r.returncode == 2 and 'unknown key "adress"' in r.stderr and str(config) in r.stderr


def test_a_token_file_others_can_read_gets_a_warning(plain, setup, tmp_path):
    path = tmp_path / "open.token"
    shutil.copy(setup["tokens"]["grafana"], path)
    os.chmod(path, 0o644)
    r = ok(benchctl("--address", plain.address, "--token-file", str(path), "node"))
    assert "open to group/others (mode 0644)" in r.stderr and "chmod 600" in r.stderr
    os.chmod(path, 0o600)
    assert "warning" not in ok(benchctl("--address", plain.address, "--token-file", str(path),
                                        "node")).stderr


def test_token_commands_refuse_bad_input():
    r = benchctl("token", "create", "--role", "root", "--name", "alice")
    assert r.returncode == 2 and '--role "root" is not a role' in r.stderr and r.stdout == ""
    r = benchctl("token", "create", "--role", "read", "--name", "two words")
    assert r.returncode == 2 and "--name" in r.stderr and r.stdout == ""
    r = subprocess.run([os.path.join(BIN, "benchctl"), "token", "hash"], input="\n",
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "stdin: the first line is empty" in r.stderr
