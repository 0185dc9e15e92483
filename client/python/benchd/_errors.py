"""benchd's exceptions: one base class, BenchdError.

- ArgumentError (also a ValueError) / ArgumentTypeError (also a TypeError):
  bad input caught before any RPC; they name the argument and what it accepts.
  CredentialsError (an ArgumentError): a credential setting that cannot be
  used, naming where it came from (argument, environment, config file).
- RpcError and its subclasses (InvalidArgument, Unavailable, NotFound, ...):
  the daemon refused a call, or could not be reached. They carry the gRPC
  status code, the daemon's message unchanged, the request field the message
  names (daemon messages start with it: "benchmark.model.preset: unknown ..."),
  the address and the RPC.
- JobFailed: a job ended FAILED, CANCELLED or INTERRUPTED and its result was
  asked for; JobNotDone: its result was asked for before it ended;
  WaitTimeout (also a TimeoutError): Job.wait(timeout=...) or
  wait_for_nodes(n, timeout) ran out.
"""
from __future__ import annotations

import re
from typing import Sequence

import grpc

__all__ = [
    "BenchdError", "ArgumentError", "ArgumentTypeError", "CredentialsError", "RpcError",
    "InvalidArgument", "Unavailable", "NotFound", "FailedPrecondition", "ResourceExhausted", "PermissionDenied",
    "Unauthenticated", "DeadlineExceeded", "Cancelled", "Aborted", "Unimplemented", "Internal",
    "JobFailed", "JobNotDone", "WaitTimeout",
]


class BenchdError(Exception):
    """Every error this package raises."""


class ArgumentError(BenchdError, ValueError):
    """A bad argument, refused before anything was sent.

    argument: its name; value: what came; accepted: what it accepts (a list of
    values, or a description)."""

    def __init__(self, argument: str, value: object, accepted: Sequence[str] | str,
                 message: str | None = None) -> None:
        self.argument = argument
        self.value = value
        self.accepted: list[str] | str = (
            accepted if isinstance(accepted, str) else list(accepted))
        if message is None:
            what = accepted if isinstance(accepted, str) else ", ".join(accepted)
            message = f"{argument}: unknown value {value!r}; expected {what}"
        super().__init__(message)


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong type, or a keyword the call does not take."""


class CredentialsError(ArgumentError):
    """A credential setting that cannot be used (a missing or malformed file,
    a client certificate without its key, a token that would travel without
    TLS to a non-loopback address), refused before any call. argument: where
    the setting came from ('credentials.tls_ca', 'BENCHD_TLS_CA', or
    '<config file>: tls_ca')."""


_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:(?:\.[A-Za-z_][A-Za-z0-9_]*)|(?:\[\d+\]))*): ")


def field_of(message: str) -> str | None:
    """The request field a daemon message names ("benchmark.model.preset: ..."), if any."""
    m = _FIELD.match(message)
    return m.group(1) if m else None


class RpcError(BenchdError):
    """A call the daemon refused or could not answer.

    code: grpc.StatusCode; message: the daemon's message (or, when the daemon
    could not be reached, what happened); field: the request field the message
    names, or None; address: the daemon's address; method: the RPC."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, code: grpc.StatusCode | None = None,
                 address: str | None = None, method: str | None = None,
                 field: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        self.address = address
        self.method = method
        self.field = field if field is not None else field_of(message)
        super().__init__(f"{self.code.name}: {message}")


class InvalidArgument(RpcError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class Unavailable(RpcError):
    code = grpc.StatusCode.UNAVAILABLE


class NotFound(RpcError):
    code = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(RpcError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhausted(RpcError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class PermissionDenied(RpcError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(RpcError):
    code = grpc.StatusCode.UNAUTHENTICATED


class DeadlineExceeded(RpcError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(RpcError):
    code = grpc.StatusCode.CANCELLED


class Aborted(RpcError):
    code = grpc.StatusCode.ABORTED


class Unimplemented(RpcError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(RpcError):
    code = grpc.StatusCode.INTERNAL


_BY_CODE: dict[grpc.StatusCode, type[RpcError]] = {
    cls.code: cls for cls in (InvalidArgument, Unavailable, NotFound, FailedPrecondition,
                              ResourceExhausted, PermissionDenied, Unauthenticated,
                              DeadlineExceeded, Cancelled, Aborted, Unimplemented, Internal)
}


def error_for(code: grpc.StatusCode, message: str, *, address: str | None = None,
              method: str | None = None) -> RpcError:
    """The exception for a status code (RpcError itself for codes without a class)."""
    cls = _BY_CODE.get(code, RpcError)
    return cls(message, code=code, address=address, method=method)


class JobFailed(BenchdError):
    """A job ended without a result (FAILED, CANCELLED or INTERRUPTED).

    job_id, state (a JobState), error_code (a grpc.StatusCode, or None),
    error_message: as the daemon stored them."""

    def __init__(self, job_id: str, state: str, error_code: grpc.StatusCode | None,
                 error_message: str) -> None:
        self.job_id = job_id
        self.state = state
        self.error_code = error_code
        self.error_message = error_message
        code = f" ({error_code.name})" if error_code is not None else ""
        why = f": {error_message}" if error_message else ""
        super().__init__(f"job {job_id} {state}{code}{why}")


class JobNotDone(BenchdError):
    """The result of a job that has not ended yet: call .wait() first."""


class WaitTimeout(BenchdError, TimeoutError):
    """Job.wait(timeout=...) ran out before the job ended (the job goes on), or
    wait_for_nodes(n, timeout) before n nodes were READY."""
