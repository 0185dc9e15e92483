"""A short pass over every kind of call against the session's live CPU daemon,
blocking and asyncio. python_client.lowest runs it (with the unit tests) on
the lowest grpcio and protobuf the package declares; there it also checks
that those really are the versions imported."""
from __future__ import annotations

import asyncio
import os

import google.protobuf
import grpc
import pytest

import benchd
from conftest import TINY, Daemon


def test_runtime_versions_are_the_expected_ones() -> None:
    grpcio, protobuf = os.environ.get("BENCHD_EXPECT_GRPCIO"), os.environ.get(
        "BENCHD_EXPECT_PROTOBUF")
    if grpcio is None and protobuf is None:
        pytest.skip("not under python_client.lowest (BENCHD_EXPECT_GRPCIO unset)")
    assert grpc.__version__ == grpcio
    assert google.protobuf.__version__ == protobuf


def test_every_call_once(client: benchd.Client, daemon: Daemon, tmp_path: object) -> None:
    node = client.node()
    assert node.device_names == ["cpu:0", "cpu:1"]
    bench = client.benchmark(**TINY, precision="bf16").wait(timeout=120, progress=False)
    assert len(bench.result.to_pandas()) == 4
    prof = client.profile(**TINY, profile_steps=1).wait(timeout=120, progress=False)
    assert len(prof.result.to_pandas()) > 0
    coll = client.collective(devices=["cpu:0", "cpu:1"], sizes=["4KiB"], warmup=1,
                             iters=2).wait(timeout=120, progress=False)
    assert list(coll.result.to_pandas()["bytes"]) == [4096]
    names = [a.name for a in client.artifacts(prof.id)]
    assert names and client.fetch_artifact(prof.id, names[0])
    assert [j.id for j in client.jobs(limit=3)] == [coll.id, prof.id, bench.id]
    assert len(client.models().to_pandas()) >= 1
    group = client.create_group(devices=["cpu:0", "cpu:1"], backend="gloo")
    assert group.id in [g.id for g in client.groups()]
    client.destroy_group(group.id)
    with pytest.raises(benchd.InvalidArgument) as e:
        client.benchmark(preset="tiny", batch_size=0)
    assert e.value.field is not None and "batch_size" in e.value.field

    async def go() -> None:
        async with benchd.AsyncClient(daemon.address) as c:
            assert (await c.node()).device_names == ["cpu:0", "cpu:1"]
            job = await (await c.benchmark(**TINY)).wait(timeout=120, progress=False)
            assert job.state == benchd.JobState.SUCCEEDED
    asyncio.run(go())
