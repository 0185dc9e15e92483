"""Credentials against real daemons: TLS, mTLS, tokens with roles, in the
clear on loopback; by argument, environment and config file; the blocking
and the asyncio client. Certificates come from tests/integration/tls_certs.py
(openssl at test time); tokens are random, their hashes in an auth file."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Iterator

import pytest

import benchd
from conftest import BIN, REPO, TINY, Daemon

sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import tls_certs  # noqa: E402

pytestmark = pytest.mark.skipif(
    not os.path.exists(os.path.join(BIN, "benchd")), reason="no benchd binary")

TOKENS = {name: "benchd_" + secrets.token_urlsafe(32) for name in ("grafana", "alice", "ops")}


def _hash(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tls_certs.Certs:
    return tls_certs.make_certs(str(tmp_path_factory.mktemp("certs")))


@pytest.fixture(scope="module")
def auth_file(tmp_path_factory: pytest.TempPathFactory, certs: tls_certs.Certs) -> str:
    path = tmp_path_factory.mktemp("auth") / "auth"
    path.write_text(
        "# role name credential\n"
        f"read grafana {_hash(TOKENS['grafana'])}\n"
        f"submit alice {_hash(TOKENS['alice'])}\n\n"
        f"admin ops {_hash(TOKENS['ops'])}\n"
        f"admin ops-cert subject:{tls_certs.subject_rfc2253(certs.clients['ops'][0])}\n")
    return str(path)


def _daemon(extra: list[str], prefix: str) -> Iterator[Daemon]:
    d = Daemon(["cpu:0"], prefix=prefix, extra_args=extra).start()
    try:
        yield d
    finally:
        d.cleanup()


@pytest.fixture(scope="module")
def tls_daemon(certs: tls_certs.Certs, auth_file: str) -> Iterator[Daemon]:
    """TLS, tokens checked (no client certificates)."""
    yield from _daemon(["--tls-cert", certs.server_cert, "--tls-key", certs.server_key,
                        "--auth-file", auth_file], "benchd-py-tls-")


@pytest.fixture(scope="module")
def mtls_daemon(certs: tls_certs.Certs, auth_file: str) -> Iterator[Daemon]:
    """TLS, every client shows a certificate of our CA; roles by subject or token."""
    yield from _daemon(["--tls-cert", certs.server_cert, "--tls-key", certs.server_key,
                        "--tls-client-ca", certs.ca_cert, "--auth-file", auth_file],
                       "benchd-py-mtls-")


@pytest.fixture(scope="module")
def plain_daemon(auth_file: str) -> Iterator[Daemon]:
    """Plaintext on loopback, tokens checked."""
    yield from _daemon(["--auth-file", auth_file], "benchd-py-plain-")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials from the machine's environment or config file."""
    for k in list(os.environ):
        if k.startswith("BENCHD_") and k != "BENCHD_BIN_DIR":
            monkeypatch.delenv(k)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))


def token_file(tmp_path: Path, name: str) -> str:
    path = tmp_path / f"{name}.token"
    path.write_text(TOKENS[name] + "\n")
    path.chmod(0o600)
    return str(path)


def tls(certs: tls_certs.Certs, **kw: str) -> benchd.Credentials:
    return benchd.Credentials(tls_ca=certs.ca_cert, **kw)


# ---------------------------------------------------------------- TLS + tokens

def test_tls_with_token_reads_and_submits(tls_daemon: Daemon, certs: tls_certs.Certs,
                                          tmp_path: Path) -> None:
    with benchd.Client(tls_daemon.address,
                       credentials=tls(certs, token_file=token_file(tmp_path, "alice"))) as c:
        sec = c.node().proto.security
        assert sec.tls and sec.tokens and not sec.client_certificates and not sec.insecure
        assert sec.caller == "alice" and sec.caller_role == benchd.v1.bench_pb2.ROLE_SUBMIT
        job = c.benchmark(**TINY)
        assert job.submitter == "alice"
        job.cancel()


def test_no_token_is_unauthenticated_with_the_daemons_message(tls_daemon: Daemon,
                                                              certs: tls_certs.Certs) -> None:
    with benchd.Client(tls_daemon.address, credentials=tls(certs)) as c:
        with pytest.raises(benchd.Unauthenticated) as e:
            c.jobs()
    assert "this daemon checks callers: send a token" in e.value.message
    assert e.value.method == "ListJobs"


def test_unknown_token_is_unauthenticated(tls_daemon: Daemon, certs: tls_certs.Certs) -> None:
    with benchd.Client(tls_daemon.address, credentials=tls(certs, token="benchd_nope")) as c:
        with pytest.raises(benchd.Unauthenticated, match="not in the daemon's auth file"):
            c.node()


def test_read_role_cannot_submit(tls_daemon: Daemon, certs: tls_certs.Certs) -> None:
    with benchd.Client(tls_daemon.address,
                       credentials=tls(certs, token=TOKENS["grafana"])) as c:
        assert c.node().proto.security.caller == "grafana"
        c.jobs()
        with pytest.raises(benchd.PermissionDenied) as e:
            c.benchmark(**TINY)
        assert e.value.message == "Submit needs the submit role; 'grafana' has read"
        with pytest.raises(benchd.PermissionDenied, match="EvictModel needs the admin role"):
            c.evict(all=True)


def test_credentials_from_env_and_config_file(tls_daemon: Daemon, certs: tls_certs.Certs,
                                              tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHD_ADDRESS", tls_daemon.address)
    monkeypatch.setenv("BENCHD_TLS_CA", certs.ca_cert)
    monkeypatch.setenv("BENCHD_TOKEN_FILE", token_file(tmp_path, "ops"))
    with benchd.Client() as c:
        assert c.tls and c.node().proto.security.caller == "ops"
    for k in ("BENCHD_ADDRESS", "BENCHD_TLS_CA", "BENCHD_TOKEN_FILE"):
        monkeypatch.delenv(k)
    # The config file, paths relative to its folder.
    folder = tmp_path / "cfg" / "benchd"
    folder.mkdir(parents=True)
    (folder / "ca.pem").write_bytes(Path(certs.ca_cert).read_bytes())
    token_file(folder, "grafana")
    (folder / "client.json").write_text(json.dumps(
        {"address": tls_daemon.address, "tls_ca": "ca.pem", "token_file": "grafana.token"}))
    with benchd.Client() as c:
        assert c.node().proto.security.caller == "grafana"
    # The environment beats the file, setting by setting.
    monkeypatch.setenv("BENCHD_TOKEN", TOKENS["alice"])
    with benchd.Client() as c:
        assert c.node().proto.security.caller == "alice"


def test_async_client_with_tls_and_token(tls_daemon: Daemon, certs: tls_certs.Certs) -> None:
    async def go() -> None:
        async with benchd.AsyncClient(tls_daemon.address,
                                      credentials=tls(certs, token=TOKENS["alice"])) as c:
            assert (await c.node()).proto.security.caller == "alice"
            job = await c.benchmark(**TINY)
            assert job.submitter == "alice"
            await job.cancel()
        async with benchd.AsyncClient(tls_daemon.address, credentials=tls(certs)) as c:
            with pytest.raises(benchd.Unauthenticated):
                await c.jobs()
        async with benchd.AsyncClient(tls_daemon.address) as c:
            with pytest.raises(benchd.Unavailable, match="TLS failed at"):
                await c.node()
    asyncio.run(go())


def test_server_name_override(tls_daemon: Daemon, certs: tls_certs.Certs) -> None:
    # The server certificate names localhost / 127.0.0.1 / ::1.
    port = tls_daemon.address.rsplit(":", 1)[1]
    good = tls(certs, token=TOKENS["alice"], tls_server_name="localhost")
    with benchd.Client(f"127.0.0.1:{port}", credentials=good) as c:
        c.node()
    bad = tls(certs, token=TOKENS["alice"], tls_server_name="gpu-node.example")
    with benchd.Client(f"127.0.0.1:{port}", credentials=bad, connect_timeout=5) as c:
        with pytest.raises(benchd.Unavailable) as e:
            c.node()
    assert f"TLS failed at 127.0.0.1:{port}" in str(e.value)
    assert "did not verify" in str(e.value) and "tls_server_name" in str(e.value)


def test_wrong_ca_fails_as_tls(tls_daemon: Daemon, certs: tls_certs.Certs) -> None:
    creds = benchd.Credentials(tls_ca=certs.other_ca_cert, token=TOKENS["alice"])
    with benchd.Client(tls_daemon.address, credentials=creds) as c:
        with pytest.raises(benchd.Unavailable) as e:
            c.node()
    assert e.value.code.name == "UNAVAILABLE"
    assert f"TLS failed at {tls_daemon.address}" in str(e.value)
    assert "certificate did not verify" in str(e.value)


def test_plaintext_client_against_tls_daemon(tls_daemon: Daemon) -> None:
    with benchd.Client(tls_daemon.address) as c:
        with pytest.raises(benchd.Unavailable) as e:
            c.node()
    assert f"TLS failed at {tls_daemon.address}" in str(e.value)
    assert "the daemon speaks TLS and this client does not" in str(e.value)


# ---------------------------------------------------------------- mTLS

def test_mtls_subject_gets_its_role(mtls_daemon: Daemon, certs: tls_certs.Certs) -> None:
    cert, key = certs.clients["ops"]
    with benchd.Client(mtls_daemon.address,
                       credentials=tls(certs, tls_cert=cert, tls_key=key)) as c:
        sec = c.node().proto.security
        assert sec.client_certificates and sec.caller == "ops-cert"
        assert sec.caller_role == benchd.v1.bench_pb2.ROLE_ADMIN
        assert c.evict(all=True) == 0


def test_mtls_subject_without_role_needs_a_token(mtls_daemon: Daemon,
                                                  certs: tls_certs.Certs) -> None:
    cert, key = certs.clients["alice"]
    with benchd.Client(mtls_daemon.address,
                       credentials=tls(certs, tls_cert=cert, tls_key=key)) as c:
        with pytest.raises(benchd.PermissionDenied, match="has no role in the daemon's auth"):
            c.jobs()
    with benchd.Client(mtls_daemon.address, credentials=tls(
            certs, tls_cert=cert, tls_key=key, token=TOKENS["alice"])) as c:
        assert c.node().proto.security.caller == "alice"


@pytest.mark.parametrize("who", ["mallory", "expired", "none"])
def test_mtls_refuses_bad_client_certificates(mtls_daemon: Daemon, certs: tls_certs.Certs,
                                              who: str) -> None:
    pair = {"mallory": certs.mallory, "expired": certs.expired, "none": None}[who]
    creds = (tls(certs, tls_cert=pair[0], tls_key=pair[1], token=TOKENS["ops"]) if pair
             else tls(certs, token=TOKENS["ops"]))
    with benchd.Client(mtls_daemon.address, credentials=creds) as c:
        with pytest.raises(benchd.Unavailable) as e:
            c.node()
    assert f"TLS failed at {mtls_daemon.address}" in str(e.value)


# ---------------------------------------------------------------- plaintext, loopback

def test_loopback_plaintext_token_as_metadata(plain_daemon: Daemon) -> None:
    with benchd.Client(plain_daemon.address,
                       credentials=benchd.Credentials(token=TOKENS["alice"])) as c:
        assert not c.tls
        sec = c.node().proto.security
        assert sec.tokens and not sec.tls and sec.caller == "alice"
        job = c.benchmark(**TINY)
        assert job.submitter == "alice"
        job.cancel()
    with benchd.Client(plain_daemon.address) as c:
        with pytest.raises(benchd.Unauthenticated):
            c.node()


def test_async_loopback_plaintext_token(plain_daemon: Daemon,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHD_TOKEN", TOKENS["grafana"])

    async def go() -> None:
        async with benchd.AsyncClient(plain_daemon.address) as c:
            assert (await c.node()).proto.security.caller == "grafana"
            with pytest.raises(benchd.PermissionDenied, match="'grafana' has read"):
                await c.benchmark(**TINY)
    asyncio.run(go())


def test_tls_client_against_plaintext_daemon(plain_daemon: Daemon,
                                             certs: tls_certs.Certs) -> None:
    with benchd.Client(plain_daemon.address,
                       credentials=tls(certs, token=TOKENS["alice"])) as c:
        with pytest.raises(benchd.Unavailable) as e:
            c.node()
    assert f"TLS failed at {plain_daemon.address}" in str(e.value)
