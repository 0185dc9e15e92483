"""benchd.Credentials and how a client's settings are resolved (the same rules
as benchctl's, common/credentials.h): for each setting, an explicit argument,
else the environment, else the client config file, else the default.

    address          address=            BENCHD_ADDRESS          "address"
    token            Credentials(token=) BENCHD_TOKEN            -
    token file       token_file=         BENCHD_TOKEN_FILE       "token_file"
    TLS, system CAs  tls=True            BENCHD_TLS=1            "tls": true
    TLS, this CA     tls_ca=             BENCHD_TLS_CA           "tls_ca"
    client cert      tls_cert=/tls_key=  BENCHD_TLS_CERT/_KEY    "tls_cert"/"tls_key"
    name to verify   tls_server_name=    BENCHD_TLS_SERVER_NAME  "tls_server_name"

The config file is JSON at $BENCHD_CLIENT_CONFIG, else
${XDG_CONFIG_HOME:-~/.config}/benchd/client.json; a missing one has no
settings, a malformed one (or an unknown key) is an error naming the file
and the key; relative paths in it are relative to its folder.

A token is never sent in the clear to an address that is not loopback: that
is refused here, before any call.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import stat
import warnings
from typing import Any, Mapping

from ._errors import ArgumentTypeError, CredentialsError

DEFAULT_ADDRESS = "127.0.0.1:7531"  # benchctl's (client/rpc.cc)
CONFIG_KEYS = ("address", "token_file", "tls", "tls_ca", "tls_cert", "tls_key",
               "tls_server_name")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


class TokenFileWarning(UserWarning):
    """A token file that others can read (as ssh warns about a private key)."""


@dataclasses.dataclass(frozen=True)
class Credentials:
    """How to prove who this client is and whom it talks to.

        benchd.Client("gpu-node:7531", credentials=benchd.Credentials(
            token_file="~/.config/benchd/token", tls_ca="ca.pem"))

    token: the token itself (prefer token_file: a token in a notebook ends up
    in its outputs and history); token_file: a file whose first line is the
    token. tls: speak TLS, verifying the daemon against the system's roots;
    tls_ca: speak TLS, verifying the daemon against this CA (PEM); tls_cert and
    tls_key: a client certificate for mTLS (both or neither); tls_server_name:
    the name to verify in the daemon's certificate when it differs from the
    address's host. A setting left unset here comes from the environment or
    the client config file (see the module's table)."""

    token: str | None = None
    token_file: str | None = None
    tls: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_server_name: str | None = None

    def __post_init__(self) -> None:
        for f in ("token", "token_file", "tls_ca", "tls_cert", "tls_key", "tls_server_name"):
            v = getattr(self, f)
            if v is not None and not isinstance(v, (str, os.PathLike)):
                raise ArgumentTypeError(
                    f"credentials.{f}", v, "a string (a path for files)",
                    f"credentials.{f}: expected a string, got {type(v).__name__}")
            if isinstance(v, os.PathLike):
                object.__setattr__(self, f, os.fspath(v))
        if not isinstance(self.tls, bool):
            raise ArgumentTypeError("credentials.tls", self.tls, "True or False",
                                    f"credentials.tls: expected True or False, got "
                                    f"{type(self.tls).__name__}")
        if self.token is not None and self.token_file is not None:
            raise CredentialsError("credentials", "token and token_file",
                                   "one of token, token_file",
                                   "credentials: token and token_file both given; pass one")

    def __repr__(self) -> str:
        # Never print the token (a notebook's output is often shared).
        shown = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                 if getattr(self, f.name) not in (None, False)}
        if "token" in shown:
            shown["token"] = "***"
        return "Credentials(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A client's settings after resolution; `source` says where each came
    from (for error messages): 'credentials.tls_ca', 'BENCHD_TLS_CA',
    '/home/u/.config/benchd/client.json: tls_ca'."""

    address: str
    token: str | None
    tls: bool
    tls_ca: str | None
    tls_cert: str | None
    tls_key: str | None
    tls_server_name: str | None
    source: Mapping[str, str]


def config_path(env: Mapping[str, str]) -> str:
    explicit = env.get("BENCHD_CLIENT_CONFIG")
    if explicit:
        return os.path.expanduser(explicit)
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "benchd", "client.json")


def load_config(path: str) -> dict[str, Any]:
    """The client config file's settings, paths made absolute; {} when it is missing."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise CredentialsError(path, None, "a readable JSON file",
                               f"{path}: cannot read the benchd client config: "
                               f"{e.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CredentialsError(path, None, "a JSON object",
                               f"{path}: the benchd client config is not valid JSON ({e}); "
                               f"expected an object with keys {', '.join(CONFIG_KEYS)}") from None
    if not isinstance(data, dict):
        raise CredentialsError(path, data, "a JSON object",
                               f"{path}: the benchd client config must be a JSON object with "
                               f"keys {', '.join(CONFIG_KEYS)}, got {type(data).__name__}")
    folder = os.path.dirname(os.path.abspath(path))
    out: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{path}: {key}"
        if key not in CONFIG_KEYS:
            raise CredentialsError(where, key, list(CONFIG_KEYS),
                                   f"{path}: unknown key {key!r} in the benchd client config; "
                                   f"accepted: {', '.join(CONFIG_KEYS)}")
        if key == "tls":
            if not isinstance(value, bool):
                raise CredentialsError(where, value, "true or false",
                                       f"{where}: expected true or false, got {value!r}")
            out[key] = value
            continue
        if not isinstance(value, str) or not value:
            raise CredentialsError(where, value, "a non-empty string",
                                   f"{where}: expected a non-empty string, got {value!r}")
        if key in ("token_file", "tls_ca", "tls_cert", "tls_key"):
            value = os.path.join(folder, os.path.expanduser(value))
        out[key] = value
    return out


def _env_bool(env: Mapping[str, str], name: str) -> bool | None:
    raw = env.get(name)
    if raw is None:
        return None
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise CredentialsError(name, raw, "1 or 0",
                           f"{name}: expected 1 (TLS on) or 0, got {raw!r}")


def read_token_file(path: str, source: str) -> str:
    """The token: the file's first line, whitespace stripped. Warns when
    group or others can read the file."""
    path = os.path.expanduser(path)
    try:
        with open(path, encoding="utf-8") as f:
            mode = os.fstat(f.fileno()).st_mode
            first = f.readline()
    except OSError as e:
        raise CredentialsError(source, path, "a readable file holding a token",
                               f"{source}: cannot read the token file {path}: "
                               f"{e.strerror}") from None
    except UnicodeDecodeError:
        raise CredentialsError(source, path, "a text file holding a token",
                               f"{source}: the token file {path} is not text") from None
    token = first.strip()
    if not token:
        raise CredentialsError(source, path, "a file whose first line is the token",
                               f"{source}: the token file {path} is empty (expected the token "
                               "on its first line, e.g. from `benchctl token create`)")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        warnings.warn(f"benchd: the token file {path} is readable by others "
                      f"(mode {stat.S_IMODE(mode):03o}); run chmod 600 {path}",
                      TokenFileWarning, stacklevel=4)
    return token


def resolve(address: str | None, credentials: Credentials | None,
            env: Mapping[str, str] | None = None) -> Resolved:
    """Every setting from its first source: argument, environment, config file, default."""
    if address is not None and not isinstance(address, str):
        raise ArgumentTypeError("address", address, "'host:port'",
                                f"address: expected 'host:port', got {type(address).__name__}")
    if credentials is not None and not isinstance(credentials, Credentials):
        raise ArgumentTypeError("credentials", credentials, "a benchd.Credentials",
                                "credentials: expected a benchd.Credentials (token_file=, "
                                "tls_ca=, ...), got " + type(credentials).__name__)
    env = os.environ if env is None else env
    cred = credentials or Credentials()
    path = config_path(env)
    file = load_config(path)
    source: dict[str, str] = {}

    def pick(key: str, explicit: Any, env_name: str) -> Any:
        if explicit is not None:
            source[key] = "address" if key == "address" else f"credentials.{key}"
            return explicit
        if env.get(env_name):
            source[key] = env_name
            return env[env_name]
        if key in file:
            source[key] = f"{path}: {key}"
            return file[key]
        return None

    addr = pick("address", address or None, "BENCHD_ADDRESS") or DEFAULT_ADDRESS
    token: str | None = None
    if cred.token is not None:
        token, source["token"] = cred.token, "credentials.token"
    elif cred.token_file is not None:
        token = read_token_file(cred.token_file, "credentials.token_file")
        source["token"] = "credentials.token_file"
    elif env.get("BENCHD_TOKEN") and env.get("BENCHD_TOKEN_FILE"):
        raise CredentialsError("BENCHD_TOKEN", "(set)", "one of BENCHD_TOKEN, BENCHD_TOKEN_FILE",
                               "BENCHD_TOKEN and BENCHD_TOKEN_FILE are both set; unset one")
    elif env.get("BENCHD_TOKEN"):
        token, source["token"] = env["BENCHD_TOKEN"].strip(), "BENCHD_TOKEN"
    else:
        token_file = pick("token_file", None, "BENCHD_TOKEN_FILE")
        if token_file is not None:
            source["token"] = source["token_file"]
            token = read_token_file(token_file, source["token"])

    tls_flag: bool | None = True if cred.tls else None
    if tls_flag:
        source["tls"] = "credentials.tls"
    else:
        tls_flag = _env_bool(env, "BENCHD_TLS")
        if tls_flag is not None:
            source["tls"] = "BENCHD_TLS"
        elif "tls" in file:
            tls_flag, source["tls"] = file["tls"], f"{path}: tls"
    tls_ca = pick("tls_ca", cred.tls_ca, "BENCHD_TLS_CA")
    tls_cert = pick("tls_cert", cred.tls_cert, "BENCHD_TLS_CERT")
    tls_key = pick("tls_key", cred.tls_key, "BENCHD_TLS_KEY")
    server_name = pick("tls_server_name", cred.tls_server_name, "BENCHD_TLS_SERVER_NAME")
    if (tls_cert is None) != (tls_key is None):
        have, lack = ("tls_cert", "tls_key") if tls_cert is not None else ("tls_key", "tls_cert")
        raise CredentialsError(source[have], "(set)", f"{have} with {lack}",
                               f"{have} is set ({source[have]}) but {lack} is not: a client "
                               "certificate needs both (credentials= tls_cert and tls_key, "
                               "BENCHD_TLS_CERT and BENCHD_TLS_KEY, or the config file's "
                               "tls_cert and tls_key)")
    tls = bool(tls_flag) or tls_ca is not None or tls_cert is not None
    if tls_cert is not None and not tls_flag and tls_ca is None:
        source.setdefault("tls", source["tls_cert"])
    if token is not None and not token:
        raise CredentialsError(source["token"], "", "a token",
                               f"{source['token']}: the token is empty")
    if token is not None and not tls and not is_loopback(addr):
        raise CredentialsError(
            source["token"], "(a token)", "TLS, or a loopback address",
            f"refusing to send the token ({source['token']}) without TLS to {addr}, which is "
            "not a loopback address: anyone on the path could read it. Use TLS (tls_ca=, "
            "BENCHD_TLS_CA or BENCHD_TLS=1), or reach the daemon over loopback (an SSH tunnel)")
    return Resolved(address=addr, token=token, tls=tls, tls_ca=tls_ca, tls_cert=tls_cert,
                    tls_key=tls_key, tls_server_name=server_name, source=source)


def host_of(address: str) -> str | None:
    """The host part of a gRPC target ('h:1', '[::1]:1', 'dns:///h:1',
    'ipv4:1.2.3.4:1'); None for unix sockets."""
    a = address.strip()
    low = a.lower()
    if low.startswith(("unix:", "unix-abstract:")):
        return None
    for scheme in ("dns:", "ipv4:", "ipv6:"):
        if low.startswith(scheme):
            a = a[len(scheme):]
            if a.startswith("//"):
                a = a[2:].split("/", 1)[1] if "/" in a[2:] else ""
            a = a.split(",", 1)[0]
            break
    if a.startswith("["):
        return a[1:a.find("]")] if "]" in a else a[1:]
    if a.count(":") > 1:  # a bare IPv6 address
        return a
    return a.rsplit(":", 1)[0] if ":" in a else a


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, localhost, unix: sockets."""
    host = host_of(address)
    if host is None:
        return True
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _read_pem(path: str, what: str, source: str) -> bytes:
    path = os.path.expanduser(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CredentialsError(source, path, f"a readable PEM file ({what})",
                               f"{source}: cannot read {what} {path}: {e.strerror}") from None
    if b"-----BEGIN " not in data:
        raise CredentialsError(source, path, f"a PEM file ({what})",
                               f"{source}: {path} is not PEM ({what}: expected "
                               "'-----BEGIN ...' blocks)")
    return data


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    root_certificates: bytes | None
    private_key: bytes | None
    certificate_chain: bytes | None


def tls_files(r: Resolved) -> TlsFiles:
    """The PEM bytes a TLS channel needs, read now so a bad path fails here."""
    return TlsFiles(
        root_certificates=_read_pem(r.tls_ca, "the CA certificate", r.source["tls_ca"])
        if r.tls_ca else None,
        private_key=_read_pem(r.tls_key, "the client key", r.source["tls_key"])
        if r.tls_key else None,
        certificate_chain=_read_pem(r.tls_cert, "the client certificate", r.source["tls_cert"])
        if r.tls_cert else None)
