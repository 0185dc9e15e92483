"""Test certificates for TLS, mTLS and certificate-subject auth, made at test
time with the `openssl` command line (EC P-256 keys, so a full set takes a
fraction of a second). Nothing here is checked in: every run gets fresh keys.

    certs = make_certs(tmpdir)
    certs.server_cert, certs.server_key        # SAN DNS:localhost, IP:127.0.0.1, IP:::1
    certs.clients["alice"]                     # (cert, key) of CN=alice,O=benchd test
    certs.other_ca_cert, certs.mallory         # an unrelated CA and a client it signed
    certs.expired                              # CN=old, signed by the right CA, expired
    subject_rfc2253(certs.clients["ops"][0])   # "CN=ops,O=benchd test"
"""
import dataclasses
import os
import subprocess

CLIENT_NAMES = ("alice", "ops")
ORGANIZATION = "benchd test"


@dataclasses.dataclass(frozen=True)
class Certs:
    directory: str
    ca_cert: str
    ca_key: str
    server_cert: str
    server_key: str
    # name -> (cert, key) for "CN=<name>,O=benchd test", signed by ca_cert.
    clients: dict
    other_ca_cert: str
    other_ca_key: str
    mallory: tuple  # (cert, key) of CN=mallory, signed by other_ca_cert
    expired: tuple  # (cert, key) of CN=old, signed by ca_cert, validity in 2020


def _openssl(*args, cwd=None):
    r = subprocess.run(["openssl", *args], capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def _subj(cn):
    # O before CN, so RFC 2253 (last RDN first) reads "CN=<cn>,O=benchd test".
    return f"/O={ORGANIZATION}/CN={cn}"


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def _key_and_csr(directory, name, cn):
    key, csr = os.path.join(directory, f"{name}.key"), os.path.join(directory, f"{name}.csr")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", key, "-out", csr, "-subj", _subj(cn))
    os.chmod(key, 0o600)
    return key, csr


def _make_ca(directory, name, cn):
    key, cert = os.path.join(directory, f"{name}.key"), os.path.join(directory, f"{name}.pem")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", _subj(cn),
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    os.chmod(key, 0o600)
    return cert, key


_SERVER_EXT = """basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
"""

_CLIENT_EXT = """basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth
"""


def _sign(directory, name, cn, ca_cert, ca_key, ext_file):
    key, csr = _key_and_csr(directory, name, cn)
    cert = os.path.join(directory, f"{name}.pem")
    _openssl("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
             "-out", cert, "-days", "2", "-sha256", "-extfile", ext_file)
    return cert, key


# `openssl x509 -req` (OpenSSL 3.0) cannot set notBefore/notAfter; `openssl ca`
# can, with a minimal CA set-up of its own.
_CA_CONFIG = """[ca]
default_ca = test_ca
[test_ca]
dir = {dir}
database = $dir/index.txt
new_certs_dir = $dir
serial = $dir/serial
default_md = sha256
policy = any
unique_subject = no
x509_extensions = client
[any]
organizationName = optional
commonName = supplied
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
"""


def _sign_expired(directory, name, cn, ca_cert, ca_key):
    key, csr = _key_and_csr(directory, name, cn)
    ca_dir = os.path.join(directory, "expired-ca")
    os.makedirs(ca_dir, exist_ok=True)
    _write(os.path.join(ca_dir, "index.txt"), "")
    _write(os.path.join(ca_dir, "serial"), "1000\n")
    config = _write(os.path.join(ca_dir, "ca.cnf"), _CA_CONFIG.format(dir=ca_dir))
    cert = os.path.join(directory, f"{name}.pem")
    _openssl("ca", "-batch", "-notext", "-preserveDN", "-config", config, "-cert", ca_cert,
             "-keyfile", ca_key, "-in", csr, "-out", cert,
             "-startdate", "20200101000000Z", "-enddate", "20200102000000Z")
    return cert, key


def make_certs(directory, server_ips=()):
    """A CA, a server certificate for localhost / 127.0.0.1 / ::1 (and any
    more IP addresses in server_ips), client certificates for alice and ops,
    an unrelated CA with a client (mallory) and an expired client certificate
    (old), all under `directory`."""
    os.makedirs(directory, exist_ok=True)
    server_ext = _write(os.path.join(directory, "server.ext"),
                        _SERVER_EXT.rstrip("\n") + "".join(f",IP:{ip}" for ip in server_ips)
                        + "\n")
    client_ext = _write(os.path.join(directory, "client.ext"), _CLIENT_EXT)
    ca_cert, ca_key = _make_ca(directory, "ca", "benchd test CA")
    server_cert, server_key = _sign(directory, "server", "localhost", ca_cert, ca_key, server_ext)
    clients = {n: _sign(directory, n, n, ca_cert, ca_key, client_ext) for n in CLIENT_NAMES}
    other_cert, other_key = _make_ca(directory, "other-ca", "unrelated CA")
    mallory = _sign(directory, "mallory", "mallory", other_cert, other_key, client_ext)
    expired = _sign_expired(directory, "old", "old", ca_cert, ca_key)
    return Certs(directory=directory, ca_cert=ca_cert, ca_key=ca_key, server_cert=server_cert,
                 server_key=server_key, clients=clients, other_ca_cert=other_cert,
                 other_ca_key=other_key, mallory=mallory, expired=expired)


def subject_rfc2253(cert):
    """The certificate's subject as the daemon's auth file names it, e.g.
    "CN=alice,O=benchd test"."""
    out = _openssl("x509", "-in", cert, "-noout", "-subject", "-nameopt", "RFC2253").strip()
    prefix = "subject="
    if not out.startswith(prefix):
        raise RuntimeError(f"unexpected `openssl x509 -subject` output for {cert}: {out!r}")
    return out[len(prefix):]


def verify(ca_cert, cert):
    """`openssl verify` of cert against ca_cert: (ok, output)."""
    r = subprocess.run(["openssl", "verify", "-CAfile", ca_cert, cert], capture_output=True,
                       text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()
