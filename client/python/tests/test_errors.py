"""Status codes map to benchd's exceptions, keeping the daemon's message and
the field it names; a daemon that is not there fails fast, naming the address."""
from __future__ import annotations

import asyncio
import socket
import time

import grpc
import pytest

import benchd
from benchd._common import translate
from benchd._errors import field_of


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize("code, cls", [
    (grpc.StatusCode.INVALID_ARGUMENT, benchd.InvalidArgument),
    (grpc.StatusCode.UNAVAILABLE, benchd.Unavailable),
    (grpc.StatusCode.NOT_FOUND, benchd.NotFound),
    (grpc.StatusCode.FAILED_PRECONDITION, benchd.FailedPrecondition),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, benchd.ResourceExhausted),
    (grpc.StatusCode.PERMISSION_DENIED, benchd.PermissionDenied),
    (grpc.StatusCode.UNAUTHENTICATED, benchd.Unauthenticated),
    (grpc.StatusCode.DEADLINE_EXCEEDED, benchd.DeadlineExceeded),
    (grpc.StatusCode.ABORTED, benchd.Aborted),
    (grpc.StatusCode.UNIMPLEMENTED, benchd.Unimplemented),
    (grpc.StatusCode.DATA_LOSS, benchd.RpcError),
])
def test_code_to_class(code: grpc.StatusCode, cls: type[benchd.RpcError]) -> None:
    msg = "benchmark.model.d_model: expected 1 or more, got -3"
    e = translate(FakeRpcError(code, msg), address="h:1", method="Submit", connected=True,
                  timeout=None)
    assert type(e) is cls and isinstance(e, benchd.BenchdError)
    assert e.code == code and e.message == msg and e.field == "benchmark.model.d_model"
    assert e.address == "h:1" and e.method == "Submit"
    assert str(e) == f"{code.name}: {msg}"


def test_field_of() -> None:
    assert field_of("memory: needs a CUDA device") == "memory"
    assert field_of("collective.targets[1].devices: cpu:9 is not served") == \
        "collective.targets[1].devices"
    assert field_of("job '7' not found") is None
    assert field_of("no group 'g9'; see groups list") is None


def test_unreachable_unavailable_names_the_address() -> None:
    e = translate(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "failed to connect"),
                  address="node7:7531", method="GetJob", connected=False, timeout=3)
    assert isinstance(e, benchd.Unavailable)
    assert "cannot reach benchd at node7:7531" in str(e) and "BENCHD_ADDRESS" in str(e)


def test_no_daemon_fails_fast_with_the_address() -> None:
    c = benchd.Client("127.0.0.1:1", connect_timeout=20)
    t = time.monotonic()
    with pytest.raises(benchd.Unavailable) as e:
        c.node()
    assert time.monotonic() - t < 3, "a refused connection must not wait for connect_timeout"
    assert "127.0.0.1:1" in str(e.value) and e.value.address == "127.0.0.1:1"
    assert e.value.code == grpc.StatusCode.UNAVAILABLE and e.value.method == "GetNodeInfo"
    c.close()


def test_no_answer_fails_within_the_connect_deadline() -> None:
    # A port that takes TCP connections (the kernel's backlog) but never
    # speaks HTTP/2: the connection attempt hangs, the connect deadline ends it.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        c = benchd.Client(address, connect_timeout=1, timeout=30)
        t = time.monotonic()
        with pytest.raises(benchd.Unavailable) as e:
            c.jobs()
        took = time.monotonic() - t
        assert 0.9 < took < 4, took
        assert address in str(e.value) and "no connection within 1 s" in str(e.value)
        c.close()


def test_address_falls_back_to_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHD_ADDRESS", "127.0.0.1:2")
    c = benchd.Client()
    assert c.address == "127.0.0.1:2"
    with pytest.raises(benchd.Unavailable, match="127.0.0.1:2"):
        c.node()
    c.close()
    monkeypatch.delenv("BENCHD_ADDRESS")
    assert benchd.Client().address == benchd.DEFAULT_ADDRESS == "127.0.0.1:7531"


def test_async_no_daemon_fails_fast() -> None:
    async def go() -> None:
        async with benchd.AsyncClient("127.0.0.1:1", connect_timeout=20) as c:
            t = time.monotonic()
            with pytest.raises(benchd.Unavailable, match="127.0.0.1:1"):
                await c.node()
            assert time.monotonic() - t < 3
    asyncio.run(go())


def test_client_arguments_checked() -> None:
    with pytest.raises(benchd.ArgumentTypeError, match="timeout"):
        benchd.Client("h:1", timeout="10")  # type: ignore[arg-type]
    with pytest.raises(benchd.ArgumentTypeError, match="credentials"):
        benchd.Client("h:1", credentials="token")  # type: ignore[arg-type]


def test_a_notebook_without_ipywidgets_gets_the_text_bar_quietly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tqdm.auto warns "IProgress not found" on every bar in a notebook without
    ipywidgets; the client takes tqdm's text bar there instead, without a
    warning, and the widget where ipywidgets is installed."""
    import importlib.util
    import warnings

    import tqdm
    from benchd import _common

    monkeypatch.setattr(_common, "_in_notebook", lambda: True)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ipywidgets" else real_find_spec(name, *a))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bar_class = _common.progress_bar_class()
        bar = bar_class(total=3, disable=True)
        bar.close()
    assert bar_class is tqdm.tqdm
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    from tqdm.auto import tqdm as auto_bar
    assert _common.progress_bar_class() is auto_bar
