"""What a channel to benchd is made of, for both clients: the resolved
settings, the gRPC channel credentials and options, the token's metadata;
and, when a connection fails, why (TLS or not) for the error message."""
from __future__ import annotations

import dataclasses
import socket
import ssl
from typing import Any, Sequence

import grpc

from ._credentials import Credentials, Resolved, host_of, resolve, tls_files

# Reconnect soon after a daemon restart (gRPC's default back-off grows to
# 120 s). Not grpc.min_reconnect_backoff_ms: gRPC also takes it as the least
# time a connection attempt is given (20 s by default), and a short one would
# fail slow handshakes; Client(connect_timeout=) bounds the wait instead.
CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.max_receive_message_length", 256 << 20),
]


class _Bearer(grpc.AuthMetadataPlugin):
    """The token as every call's `authorization: Bearer` metadata (TLS channels)."""

    def __init__(self, token: str) -> None:
        self._metadata = (("authorization", f"Bearer {token}"),)

    def __call__(self, context: grpc.AuthMetadataContext,
                 callback: grpc.AuthMetadataPluginCallback) -> None:
        callback(self._metadata, None)


@dataclasses.dataclass(frozen=True)
class ChannelParts:
    settings: Resolved
    options: list[tuple[str, Any]]
    # None: a plaintext channel.
    credentials: grpc.ChannelCredentials | None
    # The token's metadata for every call on a plaintext (loopback) channel;
    # on TLS channels the channel credentials carry it, so this is None.
    metadata: tuple[tuple[str, str], ...] | None

    @property
    def address(self) -> str:
        return self.settings.address


def channel_parts(address: str | None, credentials: Credentials | None,
                  options: Sequence[tuple[str, Any]]) -> ChannelParts:
    r = resolve(address, credentials)
    opts = [*CHANNEL_OPTIONS, *options]
    if not r.tls:
        metadata = (("authorization", f"Bearer {r.token}"),) if r.token else None
        return ChannelParts(r, opts, None, metadata)
    files = tls_files(r)
    creds = grpc.ssl_channel_credentials(root_certificates=files.root_certificates,
                                         private_key=files.private_key,
                                         certificate_chain=files.certificate_chain)
    if r.token:
        creds = grpc.composite_channel_credentials(
            creds, grpc.metadata_call_credentials(_Bearer(r.token), name="benchd-token"))
    if r.tls_server_name:
        opts.append(("grpc.ssl_target_name_override", r.tls_server_name))
    return ChannelParts(r, opts, creds, None)


def _port_of(address: str) -> int | None:
    tail = address.rsplit(":", 1)
    if len(tail) != 2 or not tail[1].isdigit():
        return None
    return int(tail[1])


def diagnose(parts: ChannelParts, timeout: float = 2.0) -> str:
    """Why no gRPC connection came up, by trying the address ourselves: the
    TCP connection, then a TLS handshake. Returns a reason for the error
    message ('connection failed' when there is nothing more to say)."""
    r = parts.settings
    host = host_of(r.address)
    port = _port_of(r.address)
    if host is None or port is None:
        return "connection failed"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        return f"connection failed: {e.strerror or e}"
    with sock:
        if r.tls:
            ctx = ssl.create_default_context(cafile=r.tls_ca)
            if r.tls_cert and r.tls_key:
                try:
                    ctx.load_cert_chain(r.tls_cert, r.tls_key)
                except (OSError, ssl.SSLError) as e:
                    return f"TLS failed at {r.address}: the client certificate: {e}"
            ctx.set_alpn_protocols(["h2"])
            name = r.tls_server_name or host
            try:
                with ctx.wrap_socket(sock, server_hostname=name) as tls:
                    # With TLS 1.3 a server checks our certificate after the
                    # handshake: it then closes (or alerts) instead of sending
                    # HTTP/2's SETTINGS. Read once to hear which.
                    tls.settimeout(1.0)
                    try:
                        first = tls.recv(1)
                    except socket.timeout:
                        first = b"?"
                    if not first:
                        return (f"TLS failed at {r.address}: the daemon closed the connection "
                                "after the handshake: it refused this client's certificate, or "
                                "needs one (mTLS: check tls_cert and tls_key, and that the "
                                "daemon's --tls-client-ca signed them)")
            except ssl.SSLCertVerificationError as e:
                return (f"TLS failed at {r.address}: the daemon's certificate did not verify "
                        f"({e.verify_message}); check tls_ca (BENCHD_TLS_CA) and "
                        "tls_server_name")
            except ssl.SSLError as e:
                why = e.reason or str(e)
                hint = ("the daemon refused this client's certificate (mTLS: check tls_cert and "
                        "tls_key)" if "ALERT" in why.upper() else
                        "does the daemon speak TLS? (it was started without --tls-cert?)")
                return f"TLS failed at {r.address}: {why}; {hint}"
            except OSError as e:
                return (f"TLS failed at {r.address}: {e.strerror or e}; does the daemon speak "
                        "TLS? (it was started without --tls-cert?)")
            return f"TLS handshake with {r.address} succeeded here, but gRPC could not connect"
        # Plaintext: is it a TLS port?
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            with ctx.wrap_socket(sock, server_hostname=host):
                pass
        except (ssl.SSLError, OSError):
            return "connection failed"
        return (f"TLS failed at {r.address}: the daemon speaks TLS and this client does not; "
                "pass credentials=benchd.Credentials(tls_ca=...) or set BENCHD_TLS_CA "
                "(BENCHD_TLS=1 for the system's roots)")
