"""Who gets in (issue 18): TLS, mTLS and tokens with roles on a real daemon,
with certificates made at test time (tls_certs.py) and tokens from
`benchctl token create`. Python grpcio is the client, so the daemon is
checked against an independent TLS stack."""
import hashlib
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

import grpc
import pytest

from conftest import BIN, Daemon, bench_pb2, bench_pb2_grpc, wait_for_state
from tls_certs import make_certs

MODEL = bench_pb2.ModelConfig(vocab_size=64, d_model=16, d_ff=32, num_layers=1, num_heads=2)
TINY = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
    model=MODEL, batch_size=1, context_length=16, warmup_steps=0, measure_steps=1))
# A job that stays queued or running long enough to be cancelled.
LONG = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
    model=MODEL, batch_size=1, context_length=16, warmup_steps=0, measure_steps=100000))

TOKENS = {"alice": "alice-" + "a" * 40, "bob": "bob-" + "b" * 40, "grafana": "grafana-" + "g" * 40}


def token_hash(token):
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def write_auth_file(path, lines):
    with open(path, "w") as f:
        f.write("# made by test_auth.py\n" + "\n".join(lines) + "\n")
    os.chmod(path, 0o600)


def bearer(token):
    return [("authorization", f"Bearer {token}")] if token else []


def code_of(call):
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value.code(), e.value.details() or ""


class TlsClient:
    """Channels to a TLS daemon, with or without a client certificate."""

    def __init__(self, daemon, certs):
        self.daemon, self.certs = daemon, certs
        self.port = daemon.address.rsplit(":", 1)[1]
        self.channels = []

    def stub(self, cert=None, ca=None):
        ca = ca or self.certs.ca_cert
        key_pem = cert_pem = None
        if cert:
            cert_pem, key_pem = (open(p, "rb").read() for p in cert)
        creds = grpc.ssl_channel_credentials(root_certificates=open(ca, "rb").read(),
                                             private_key=key_pem, certificate_chain=cert_pem)
        ch = grpc.secure_channel(f"localhost:{self.port}", creds)
        self.channels.append(ch)
        return bench_pb2_grpc.BenchStub(ch)

    def close(self):
        for ch in self.channels:
            ch.close()


@pytest.fixture(scope="module")
def certs():
    d = tempfile.mkdtemp(prefix="benchd-certs-")
    yield make_certs(d)
    shutil.rmtree(d, ignore_errors=True)


def start(extra, prefix="benchd-auth-"):
    data = tempfile.mkdtemp(prefix=prefix)
    return Daemon(data, extra).start()


def stop(d):
    d.stop()
    shutil.rmtree(d.data_dir, ignore_errors=True)


def wait_up(stub, metadata, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        info = stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), metadata=metadata, timeout=10)
        if all(d.worker_state == bench_pb2.WORKER_STATE_UP for d in info.devices):
            return info
        time.sleep(0.1)
    raise AssertionError("worker not up")


@pytest.fixture(scope="module")
def mtls(certs):
    """mTLS + an auth file with tokens and one certificate subject."""
    auth = os.path.join(certs.directory, "auth")
    write_auth_file(auth, [
        f"submit alice {token_hash(TOKENS['alice'])}",
        f"submit bob {token_hash(TOKENS['bob'])}",
        f"read grafana {token_hash(TOKENS['grafana'])}",
        "admin ops subject:CN=ops,O=benchd test",
    ])
    d = start(["--tls-cert", certs.server_cert, "--tls-key", certs.server_key,
               "--tls-client-ca", certs.ca_cert, "--auth-file", auth])
    client = TlsClient(d, certs)
    wait_up(client.stub(certs.clients["ops"]), [])
    yield d, client
    client.close()
    stop(d)


def test_the_right_credentials_pass_and_node_info_says_who(mtls, certs):
    d, client = mtls
    alice = client.stub(certs.clients["alice"])
    info = alice.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), metadata=bearer(TOKENS["alice"]),
                             timeout=10)
    s = info.security
    assert (s.tls, s.client_certificates, s.tokens, s.insecure) == (True, True, True, False)
    assert (s.caller, s.caller_role) == ("alice", bench_pb2.ROLE_SUBMIT)
    # A certificate whose subject the auth file names needs no token.
    ops = client.stub(certs.clients["ops"]).GetNodeInfo(bench_pb2.GetNodeInfoRequest(),
                                                        timeout=10)
    assert (ops.security.caller, ops.security.caller_role) == ("ops", bench_pb2.ROLE_ADMIN)


def test_refusals_name_why_and_are_logged_with_the_peer(mtls, certs):
    d, client = mtls
    alice_cert = client.stub(certs.clients["alice"])
    req = bench_pb2.GetNodeInfoRequest()
    # A certificate the CA signed, but neither a token nor a role for its subject.
    code, msg = code_of(lambda: alice_cert.GetNodeInfo(req, timeout=10))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "CN=alice,O=benchd test" in msg and "no role" in msg
    # A token the daemon does not know.
    code, msg = code_of(lambda: alice_cert.GetNodeInfo(req, metadata=bearer("wrong"), timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED and "not in the daemon's auth file" in msg
    # Not a bearer token at all.
    code, msg = code_of(lambda: alice_cert.GetNodeInfo(
        req, metadata=[("authorization", "Basic YWxpY2U6cHc=")], timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED and "Bearer" in msg
    # A read token submitting; a submit token doing admin's work.
    code, msg = code_of(lambda: alice_cert.Submit(bench_pb2.SubmitRequest(spec=TINY),
                                                  metadata=bearer(TOKENS["grafana"]), timeout=10))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "Submit needs the submit role; 'grafana' has read" in msg
    for call, request in [("CreateGroup", bench_pb2.CreateGroupRequest(devices=["cpu:0"])),
                          ("DestroyGroup", bench_pb2.DestroyGroupRequest(group="g1")),
                          ("EvictModel", bench_pb2.EvictModelRequest())]:
        code, msg = code_of(lambda: getattr(alice_cert, call)(
            request, metadata=bearer(TOKENS["alice"]), timeout=10))
        assert code == grpc.StatusCode.PERMISSION_DENIED, call
        assert f"{call} needs the admin role" in msg
    # Streams are checked too.
    code, _ = code_of(lambda: list(alice_cert.Watch(bench_pb2.WatchRequest(job_id="1"),
                                                    metadata=bearer("wrong"), timeout=10)))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    log = open(d.log_path).read()
    assert re.search(r"auth: refused Submit from ipv[46]:[^ ]+: PERMISSION_DENIED: 'grafana'", log)
    assert re.search(r"auth: refused GetNodeInfo from ipv[46]:[^ ]+: UNAUTHENTICATED", log)


def test_jobs_record_their_submitter_and_only_admin_cancels_anothers(mtls, certs):
    d, client = mtls
    alice = client.stub(certs.clients["alice"])
    job = alice.Submit(bench_pb2.SubmitRequest(spec=LONG), metadata=bearer(TOKENS["alice"]),
                       timeout=10)
    assert job.submitter == "alice"
    got = alice.GetJob(bench_pb2.GetJobRequest(job_id=job.id), metadata=bearer(TOKENS["grafana"]),
                       timeout=10)
    assert got.submitter == "alice"
    listed = alice.ListJobs(bench_pb2.ListJobsRequest(), metadata=bearer(TOKENS["grafana"]),
                            timeout=10)
    assert [j.submitter for j in listed.jobs if j.id == job.id] == ["alice"]
    cancel = bench_pb2.CancelJobRequest(job_id=job.id)
    code, msg = code_of(lambda: alice.CancelJob(cancel, metadata=bearer(TOKENS["bob"]),
                                                timeout=10))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert f"job {job.id} was submitted by 'alice'" in msg and "admin" in msg
    code, _ = code_of(lambda: alice.CancelJob(cancel, metadata=bearer(TOKENS["grafana"]),
                                              timeout=10))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    # Bob's own job he may cancel; alice's, admin (ops, by certificate) may.
    bobs = alice.Submit(bench_pb2.SubmitRequest(spec=TINY), metadata=bearer(TOKENS["bob"]),
                        timeout=10)
    alice.CancelJob(bench_pb2.CancelJobRequest(job_id=bobs.id), metadata=bearer(TOKENS["bob"]),
                    timeout=10)
    ops = client.stub(certs.clients["ops"])
    ops.CancelJob(cancel, timeout=10)
    done = wait_for_state(ops, job.id, [bench_pb2.JOB_STATE_CANCELLED, bench_pb2.JOB_STATE_FAILED,
                                        bench_pb2.JOB_STATE_SUCCEEDED])
    assert done.state == bench_pb2.JOB_STATE_CANCELLED


@pytest.mark.parametrize("who", ["other_ca", "expired", "no_certificate", "plaintext"])
def test_bad_certificates_fail_the_handshake(mtls, certs, who):
    d, client = mtls
    if who == "plaintext":
        ch = grpc.insecure_channel(d.address)
        client.channels.append(ch)
        stub = bench_pb2_grpc.BenchStub(ch)
    else:
        cert = {"other_ca": certs.mallory, "expired": certs.expired, "no_certificate": None}[who]
        stub = client.stub(cert)
    code, msg = code_of(lambda: stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(),
                                                 metadata=bearer(TOKENS["alice"]), timeout=5))
    # No call reaches the daemon: the TLS handshake fails first.
    assert code == grpc.StatusCode.UNAVAILABLE, (code, msg)
    assert d.proc.poll() is None


def test_a_client_that_does_not_trust_the_daemon_refuses_it(mtls, certs):
    d, client = mtls
    stub = client.stub(certs.clients["ops"], ca=certs.other_ca_cert)
    code, _ = code_of(lambda: stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=5))
    assert code == grpc.StatusCode.UNAVAILABLE


def test_tokens_on_loopback_without_tls(tmp_path):
    auth = str(tmp_path / "auth")
    write_auth_file(auth, [f"read grafana {token_hash(TOKENS['grafana'])}"])
    d = start(["--auth-file", auth])
    try:
        stub = d.stub
        code, msg = code_of(lambda: stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10))
        assert code == grpc.StatusCode.UNAUTHENTICATED and "send a token" in msg
        info = stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), metadata=bearer(TOKENS["grafana"]),
                                timeout=10)
        assert (info.security.tls, info.security.tokens) == (False, True)
        assert info.security.caller == "grafana"
        # Health stays open for probes.
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        health = health_pb2_grpc.HealthStub(d.channel)
        health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    finally:
        stop(d)


def test_without_credentials_checks_everyone_is_admin_and_jobs_have_no_submitter(daemon):
    info = daemon.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10)
    s = info.security
    assert (s.tls, s.client_certificates, s.tokens, s.insecure) == (False, False, False, False)
    assert (s.caller, s.caller_role) == ("", bench_pb2.ROLE_ADMIN)
    job = daemon.stub.Submit(bench_pb2.SubmitRequest(spec=TINY), timeout=10)
    assert job.submitter == ""


def sighup(d, marker):
    """SIGHUP, then wait for the daemon to log `marker` once more."""
    before = d.log().count(marker)
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while d.log().count(marker) == before:
        assert time.time() < deadline, f"no '{marker}' after SIGHUP: {d.log()}"
        time.sleep(0.05)


def test_sighup_reloads_the_auth_file_and_the_certificate(certs, tmp_path):
    auth = str(tmp_path / "auth")
    write_auth_file(auth, [f"read alice {token_hash(TOKENS['alice'])}"])
    cert, key = str(tmp_path / "server.pem"), str(tmp_path / "server.key")
    shutil.copy(certs.server_cert, cert)
    shutil.copy(certs.server_key, key)
    d = start(["--tls-cert", cert, "--tls-key", key, "--auth-file", auth])
    try:
        client = TlsClient(d, certs)
        port = int(client.port)

        def served_cert():
            ctx = ssl.create_default_context(cafile=certs.ca_cert)
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    return s.getpeercert(binary_form=True)

        def node(token):
            return client.stub().GetNodeInfo(bench_pb2.GetNodeInfoRequest(),
                                             metadata=bearer(token), timeout=10)

        first = served_cert()
        assert node(TOKENS["alice"]).security.caller_role == bench_pb2.ROLE_READ
        # Alice becomes submit, bob is added.
        write_auth_file(auth, [f"submit alice {token_hash(TOKENS['alice'])}",
                               f"read bob {token_hash(TOKENS['bob'])}"])
        # A renewed server certificate (same key pair is not required).
        renewed = make_certs(str(tmp_path / "renewed"))
        sighup(d, "SIGHUP: auth file reloaded: 2 principals")
        assert node(TOKENS["alice"]).security.caller_role == bench_pb2.ROLE_SUBMIT
        assert node(TOKENS["bob"]).security.caller == "bob"
        assert served_cert() == first  # nothing changed on disk: same certificate

        # A broken reload keeps what works: a key that is not the certificate's.
        shutil.copy(renewed.server_cert, cert)
        sighup(d, "SIGHUP: TLS kept the old certificate")
        assert "is not the key of the certificate" in d.log()
        assert served_cert() == first
        # The renewed pair: new connections get it.
        shutil.copy(renewed.server_key, key)
        shutil.copy(renewed.server_cert, cert)
        write_auth_file(auth, ["this line is not valid"])
        sighup(d, "SIGHUP: kept the old auth file")
        assert d.log().count("SIGHUP: TLS reloaded") == 2
        ctx = ssl.create_default_context(cafile=renewed.ca_cert)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                assert s.getpeercert(binary_form=True) != first
        client.certs = renewed  # trust the renewed certificate's CA from here on
        assert node(TOKENS["bob"]).security.caller == "bob"  # the old auth file still holds
        client.close()
    finally:
        stop(d)


def non_loopback_ip():
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    return next((a for a in out if ":" not in a and not a.startswith("127.")), None)


def start_fails(args):
    data = tempfile.mkdtemp(prefix="benchd-auth-refused-")
    try:
        r = subprocess.run([os.path.join(BIN, "benchd"), "--data-dir", data, "--device", "cpu:0",
                            *args], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0, r.stderr
        return r.stderr
    finally:
        shutil.rmtree(data, ignore_errors=True)


def test_a_network_address_needs_tls_and_a_caller_check_unless_insecure(certs, tmp_path):
    err = start_fails(["--listen", "0.0.0.0:0", "--metrics", "off"])
    assert "reachable from other hosts" in err and "--insecure" in err and "--tls-cert" in err
    err = start_fails(["--listen", "0.0.0.0:0", "--metrics", "off", "--tls-cert",
                       certs.server_cert, "--tls-key", certs.server_key])
    assert "every caller may do everything" in err
    err = start_fails(["--listen", "127.0.0.1:0", "--metrics", "0.0.0.0:0"])
    assert "--metrics 0.0.0.0:0 is reachable from other hosts" in err
    err = start_fails(["--tls-cert", certs.server_cert])
    assert "--tls-cert and --tls-key go together" in err
    err = start_fails(["--tls-cert", certs.server_cert, "--tls-key", certs.clients["ops"][1]])
    assert "is not the key of the certificate" in err
    err = start_fails(["--tls-cert", certs.expired[0], "--tls-key", certs.expired[1]])
    assert "expired on" in err
    bad_auth = str(tmp_path / "auth")
    write_auth_file(bad_auth, ["root alice " + token_hash("x")])
    err = start_fails(["--auth-file", bad_auth])
    assert f"{bad_auth}:2: unknown role 'root'" in err
    os.chmod(bad_auth, 0o666)
    err = start_fails(["--auth-file", bad_auth])
    assert "chmod go-w" in err

    d = start(["--listen", "0.0.0.0:0", "--metrics", "off", "--insecure"])
    try:
        port = d.address.rsplit(":", 1)[1]
        stub = bench_pb2_grpc.BenchStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        info = stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10)
        assert info.security.insecure and not info.security.tls
        assert "WARNING: --insecure" in d.log()
    finally:
        stop(d)


def test_metrics_stay_on_loopback_unless_insecure(certs, tmp_path):
    # /metrics has no TLS (Debian's civetweb crashes serving HTTPS with
    # OpenSSL 3): off loopback it is refused, even when gRPC has TLS.
    auth = str(tmp_path / "auth")
    write_auth_file(auth, [f"read grafana {token_hash(TOKENS['grafana'])}"])
    err = start_fails(["--listen", "0.0.0.0:0", "--metrics", "0.0.0.0:0", "--tls-cert",
                       certs.server_cert, "--tls-key", certs.server_key, "--auth-file", auth])
    assert "/metrics has no TLS here" in err
    d = start(["--metrics", "0.0.0.0:0", "--insecure"])
    try:
        port = d.metrics_address.rsplit(":", 1)[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert b"benchd_worker_up" in r.read()
    finally:
        stop(d)


def test_an_empty_or_directory_auth_file_is_refused_at_start(tmp_path):
    empty = str(tmp_path / "auth")
    write_auth_file(empty, ["# nobody may call yet"])
    err = start_fails(["--auth-file", empty])
    assert f"auth file {empty}: has no entries, so every caller would be refused" in err, err
    directory = str(tmp_path / "auth.d")
    os.mkdir(directory, 0o700)
    err = start_fails(["--auth-file", directory])
    assert f"auth file {directory}: is a directory" in err, err


def test_a_unix_socket_listener_is_named_as_given(tmp_path):
    sock = str(tmp_path / "benchd.sock")
    d = start(["--listen", f"unix:{sock}", "--metrics", "off"])
    try:
        assert d.address == f"unix:{sock}", d.address
        info = d.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10)
        assert info.hostname
        assert f"serving gRPC on unix:{sock}," in d.log(), d.log()
    finally:
        stop(d)
