"""How a client's settings are resolved (argument > environment > config
file > default), the files' checks, and the loopback rule for tokens. No
daemon: resolve() is called directly with an env mapping of the test's own,
and Client() only where no call is made."""
from __future__ import annotations

import json
import os
import stat
import warnings
from pathlib import Path
from typing import Any

import pytest

import benchd
from benchd._channel import channel_parts
from benchd._credentials import host_of, is_loopback, resolve

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def write(path: Path, text: str, mode: int = 0o600) -> str:
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty config folder (nothing from the real one)."""
    (tmp_path / "cfg").mkdir()
    return {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}


def config(env: dict[str, str], data: Any) -> str:
    folder = Path(env["XDG_CONFIG_HOME"]) / "benchd"
    folder.mkdir(exist_ok=True)
    path = folder / "client.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_defaults(home: dict[str, str]) -> None:
    r = resolve(None, None, home)
    assert r.address == "127.0.0.1:7531" and r.token is None and not r.tls
    assert r.tls_ca is None and r.tls_cert is None and r.tls_server_name is None


def test_address_argument_env_file_default(home: dict[str, str]) -> None:
    config(home, {"address": "file-host:1"})
    assert resolve(None, None, home).address == "file-host:1"
    env = {**home, "BENCHD_ADDRESS": "env-host:2"}
    assert resolve(None, None, env).address == "env-host:2"
    r = resolve("arg-host:3", None, env)
    assert r.address == "arg-host:3" and r.source["address"] == "address"


def test_token_sources_in_order(home: dict[str, str], tmp_path: Path) -> None:
    file_token = write(tmp_path / "file.token", "from-file\n")
    env_token_file = write(tmp_path / "env.token", "  from-env-file  \nsecond line ignored\n")
    arg_token_file = write(tmp_path / "arg.token", "from-arg-file")
    config(home, {"token_file": file_token})
    assert resolve(None, None, home).token == "from-file"
    env = {**home, "BENCHD_TOKEN_FILE": env_token_file}
    r = resolve(None, None, env)
    assert r.token == "from-env-file" and r.source["token"] == "BENCHD_TOKEN_FILE"
    assert resolve(None, None, {**home, "BENCHD_TOKEN": "from-env"}).token == "from-env"
    r = resolve(None, benchd.Credentials(token_file=arg_token_file), env)
    assert r.token == "from-arg-file" and r.source["token"] == "credentials.token_file"
    assert resolve(None, benchd.Credentials(token="t0"), env).token == "t0"


def test_config_paths_are_relative_to_its_folder(home: dict[str, str]) -> None:
    path = config(home, {"token_file": "tok", "tls_ca": "ca.pem"})
    folder = os.path.dirname(path)
    write(Path(folder) / "tok", "relative-token")
    r = resolve("10.0.0.1:7531", None, home)
    assert r.token == "relative-token" and r.tls_ca == os.path.join(folder, "ca.pem") and r.tls


def test_config_file_from_benchd_client_config(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.json"
    path.write_text(json.dumps({"address": "x:9", "tls": True}))
    r = resolve(None, None, {"BENCHD_CLIENT_CONFIG": str(path)})
    assert r.address == "x:9" and r.tls and r.source["tls"] == f"{path}: tls"


def test_missing_config_file_is_no_settings(tmp_path: Path) -> None:
    r = resolve(None, None, {"BENCHD_CLIENT_CONFIG": str(tmp_path / "none.json")})
    assert r.address == benchd.DEFAULT_ADDRESS


@pytest.mark.parametrize("content, words", [
    ("{not json", ["not valid JSON"]),
    ("[1, 2]", ["must be a JSON object"]),
    ('{"adress": "h:1"}', ["unknown key 'adress'", "address, token_file, tls"]),
    ('{"tls": "yes"}', ["tls: expected true or false", "'yes'"]),
    ('{"tls_ca": 3}', ["tls_ca: expected a non-empty string", "3"]),
])
def test_bad_config_file_names_file_and_key(home: dict[str, str], content: str,
                                            words: list[str]) -> None:
    path = config(home, content)
    with pytest.raises(benchd.CredentialsError) as e:
        resolve(None, None, home)
    assert path in str(e.value)
    for w in words:
        assert w in str(e.value)


def test_tls_settings_by_env(home: dict[str, str]) -> None:
    env = {**home, "BENCHD_TLS_CA": "/ca.pem", "BENCHD_TLS_CERT": "/c.pem",
           "BENCHD_TLS_KEY": "/c.key", "BENCHD_TLS_SERVER_NAME": "node7"}
    r = resolve(None, None, env)
    assert r.tls and (r.tls_ca, r.tls_cert, r.tls_key, r.tls_server_name) == (
        "/ca.pem", "/c.pem", "/c.key", "node7")
    assert resolve(None, None, {**home, "BENCHD_TLS": "1"}).tls
    assert not resolve(None, None, {**home, "BENCHD_TLS": "0"}).tls
    with pytest.raises(benchd.CredentialsError, match="BENCHD_TLS: expected 1 .* got 'maybe'"):
        resolve(None, None, {**home, "BENCHD_TLS": "maybe"})


def test_explicit_beats_env_per_setting(home: dict[str, str]) -> None:
    env = {**home, "BENCHD_TLS_CA": "/env-ca.pem", "BENCHD_TLS_SERVER_NAME": "env-name"}
    r = resolve(None, benchd.Credentials(tls_ca="/arg-ca.pem"), env)
    assert r.tls_ca == "/arg-ca.pem" and r.tls_server_name == "env-name"
    assert r.source["tls_ca"] == "credentials.tls_ca"
    assert r.source["tls_server_name"] == "BENCHD_TLS_SERVER_NAME"


def test_cert_without_key_is_an_error(home: dict[str, str]) -> None:
    with pytest.raises(benchd.CredentialsError) as e:
        resolve(None, benchd.Credentials(tls_cert="/c.pem"), home)
    assert "tls_cert is set (credentials.tls_cert) but tls_key is not" in str(e.value)
    with pytest.raises(benchd.CredentialsError, match="tls_key is set .BENCHD_TLS_KEY."):
        resolve(None, None, {**home, "BENCHD_TLS_KEY": "/k"})


def test_token_and_token_file_together(home: dict[str, str]) -> None:
    with pytest.raises(benchd.CredentialsError, match="token and token_file"):
        benchd.Credentials(token="a", token_file="/b")
    with pytest.raises(benchd.CredentialsError, match="BENCHD_TOKEN and BENCHD_TOKEN_FILE"):
        resolve(None, None, {**home, "BENCHD_TOKEN": "a", "BENCHD_TOKEN_FILE": "/b"})


def test_token_file_checks(home: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(benchd.CredentialsError) as e:
        resolve(None, None, {**home, "BENCHD_TOKEN_FILE": str(tmp_path / "missing")})
    assert "BENCHD_TOKEN_FILE: cannot read the token file" in str(e.value)
    assert str(tmp_path / "missing") in str(e.value)
    empty = write(tmp_path / "empty", "\n")
    with pytest.raises(benchd.CredentialsError, match="is empty"):
        resolve(None, benchd.Credentials(token_file=empty), home)


def test_token_file_readable_by_others_warns(home: dict[str, str], tmp_path: Path) -> None:
    loose = write(tmp_path / "loose", "tok", mode=0o644)
    with pytest.warns(benchd.TokenFileWarning, match="readable by others .mode 644.*chmod 600"):
        assert resolve(None, benchd.Credentials(token_file=loose), home).token == "tok"
    tight = write(tmp_path / "tight", "tok", mode=0o600)
    assert stat.S_IMODE(os.stat(tight).st_mode) == 0o600
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve(None, benchd.Credentials(token_file=tight), home)


@pytest.mark.parametrize("address, loopback", [
    ("127.0.0.1:7531", True), ("127.8.9.10:1", True), ("localhost:7531", True),
    ("[::1]:7531", True), ("::1", True), ("unix:/run/benchd.sock", True),
    ("unix:///run/benchd.sock", True), ("dns:///localhost:7531", True),
    ("ipv4:127.0.0.1:7531", True), ("ipv6:[::1]:7531", True),
    ("10.0.0.5:7531", False), ("gpu-node:7531", False), ("[2001:db8::1]:7531", False),
    ("dns:///gpu-node:7531", False), ("localhost.example.com:1", False),
])
def test_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_host_of() -> None:
    assert host_of("h:1") == "h" and host_of("[fe80::1]:1") == "fe80::1"
    assert host_of("dns://8.8.8.8/node:7") == "node" and host_of("unix:/x") is None


def test_token_refused_in_the_clear_to_a_remote_address(home: dict[str, str]) -> None:
    env = {**home, "BENCHD_TOKEN": "secret-token"}
    with pytest.raises(benchd.CredentialsError) as e:
        resolve("10.0.0.5:7531", None, env)
    msg = str(e.value)
    assert "refusing to send the token (BENCHD_TOKEN) without TLS to 10.0.0.5:7531" in msg
    assert "secret-token" not in msg
    # Loopback in the clear, or anywhere with TLS, is fine.
    assert resolve("127.0.0.1:7531", None, env).token == "secret-token"
    assert resolve("10.0.0.5:7531", None, {**env, "BENCHD_TLS": "1"}).tls


def test_token_travels_as_metadata_in_the_clear_and_as_call_credentials_on_tls(
        home: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in home.items():
        monkeypatch.setenv(k, v)
    for k in ("BENCHD_TOKEN", "BENCHD_TOKEN_FILE", "BENCHD_TLS", "BENCHD_TLS_CA",
              "BENCHD_ADDRESS", "BENCHD_CLIENT_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    plain = channel_parts("127.0.0.1:7531", benchd.Credentials(token="t1"), ())
    assert plain.credentials is None and plain.metadata == (("authorization", "Bearer t1"),)
    ca = write(tmp_path / "ca.pem", PEM)
    tls = channel_parts("node:7531", benchd.Credentials(token="t1", tls_ca=ca,
                                                        tls_server_name="localhost"), ())
    assert tls.credentials is not None and tls.metadata is None
    assert ("grpc.ssl_target_name_override", "localhost") in tls.options
    none = channel_parts("127.0.0.1:7531", None, ())
    assert none.credentials is None and none.metadata is None


def test_pem_files_are_read_up_front(home: dict[str, str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", home["XDG_CONFIG_HOME"])
    monkeypatch.delenv("BENCHD_CLIENT_CONFIG", raising=False)
    with pytest.raises(benchd.CredentialsError) as e:
        benchd.Client("h:1", credentials=benchd.Credentials(tls_ca=str(tmp_path / "no-ca.pem")))
    assert "credentials.tls_ca: cannot read the CA certificate" in str(e.value)
    not_pem = write(tmp_path / "ca.txt", "hello")
    with pytest.raises(benchd.CredentialsError, match="is not PEM"):
        benchd.Client("h:1", credentials=benchd.Credentials(tls_ca=not_pem))


def test_credentials_arguments_checked() -> None:
    with pytest.raises(benchd.ArgumentTypeError, match="credentials.tls: expected True or False"):
        benchd.Credentials(tls="yes")  # type: ignore[arg-type]
    with pytest.raises(benchd.ArgumentTypeError, match="credentials.tls_ca: expected a string"):
        benchd.Credentials(tls_ca=3)  # type: ignore[arg-type]
    assert "secret" not in repr(benchd.Credentials(token="secret", tls=True))
