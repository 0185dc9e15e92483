"""Every request kind and call against a real daemon on the CPU (cpu:0, cpu:1)."""
from __future__ import annotations

import asyncio
import json
import os
import shutil

import grpc
import pytest

import benchd
from benchd.v1 import bench_pb2 as pb
from conftest import FIXTURES, TINY, Daemon


def test_node(client: benchd.Client) -> None:
    node = client.node()
    assert node.device_names == ["cpu:0", "cpu:1"]
    df = node.to_pandas()
    assert list(df["device"]) == ["cpu:0", "cpu:1"]
    assert set(df["worker_state"]) == {"up"}
    assert "benchd" in node.versions and node.data_dir
    assert "cpu:1" in node._repr_html_()


def test_benchmark_resolves_and_reports(results: dict[str, benchd.Job]) -> None:
    job = results["tiny-bf16"]
    assert job.kind == "benchmark" and job.devices == ["cpu:0"]
    b = job.spec.benchmark
    assert b.mode == pb.BENCHMARK_MODE_TRAIN_STEP and b.precision == pb.PRECISION_BF16
    assert (b.batch_size, b.context_length, b.warmup_steps, b.measure_steps) == (2, 32, 1, 3)
    r = job.result
    assert isinstance(r, benchd.BenchmarkResult)
    assert r.spec.model.d_model == 64  # the preset, expanded
    assert r.median_step_ms == pytest.approx(r.proto.step.median * 1e3)
    assert r.tokens_per_second > 0 and r.parameter_count > 0


def test_events_follow_a_live_job(client: benchd.Client) -> None:
    job = client.benchmark(**TINY)
    events = list(job.events())
    kinds = [e.kind for e in events]
    assert kinds[0] == "queued" and kinds[-1] == "result", kinds
    assert kinds.count("warmup_step") == 1 and kinds.count("step") == 3
    assert [e.step.index for e in events if e.step is not None] == [0, 1, 2, 3]
    assert all(e.total_steps == 4 for e in events if e.step is not None)
    assert job.state == benchd.JobState.SUCCEEDED  # the terminal event updated the handle
    # An ended job's stream is its final event.
    again = list(job.events())
    assert again[-1].kind == "result" and again[-1].job is not None


def test_profile(results: dict[str, benchd.Job]) -> None:
    job = results["profile"]
    r = job.result
    assert isinstance(r, benchd.ProfileResult)
    assert r.kernel_source == "cpu_operator_self_time"
    assert r.range_names[0] == "step" and "forward" in r.range_names
    arts = job.artifacts()
    assert "trace.json" in [a.name for a in arts]
    assert arts.to_pandas().columns.tolist() == ["name", "bytes"]


def test_download_artifact(results: dict[str, benchd.Job], tmp_path: str) -> None:
    job = results["profile"]
    size = {a.name: a.size_bytes for a in job.artifacts()}["trace.json"]
    path = job.download("trace.json", str(tmp_path))
    assert path == os.path.join(str(tmp_path), "trace.json")
    assert os.path.getsize(path) == size
    with open(path) as f:
        assert "traceEvents" in json.load(f)
    assert not os.path.exists(path + ".part")
    with pytest.raises(benchd.NotFound, match="no artifact 'nope'"):
        job.download("nope", str(tmp_path / "x"))  # type: ignore[operator]
    assert not os.path.exists(str(tmp_path / "x")) and not os.path.exists(str(tmp_path / "x.part"))  # type: ignore[operator]


def test_collective_transient(results: dict[str, benchd.Job]) -> None:
    job = results["collective"]
    assert job.devices == ["cpu:0", "cpu:1"]
    r = job.result
    assert isinstance(r, benchd.CollectiveResult)
    assert r.wrong_elements == 0 and r.op == "all_reduce"
    assert [row.size_bytes for row in r.proto.rows] == [4096, 65536]
    assert r.proto.groups[0].transient
    assert "<svg" in r.svg("duration_vs_size")
    names = [a.name for a in job.artifacts()]
    assert "duration_vs_size.svg" in names


def test_groups_and_collective_on_a_group(client: benchd.Client) -> None:
    g = client.create_group(devices="cpu:0,cpu:1", backend="gloo", group_timeout=60)
    try:
        assert g.id in [x.id for x in client.groups()]
        df = client.groups().to_pandas()
        row = df[df["id"] == g.id].iloc[0]
        assert row["backend"] == "gloo" and row["state"] == "ready" and row["devices"] == "cpu:0,cpu:1"
        job = client.collective(group=g.id, sizes=[1024, 2048], warmup=0, iters=2,
                                op="broadcast")
        rows = [e.row for e in job.events() if e.row is not None]
        assert [r.size_bytes for r in rows] == [1024, 2048]
        r = job.wait(timeout=120, progress=False).result
        assert r.proto.groups[0].group == g.id and not r.proto.groups[0].transient
        assert r.to_pandas()["op"].tolist() == ["broadcast", "broadcast"]
    finally:
        gone = client.destroy_group(g.id)
    assert gone.id == g.id
    assert g.id not in [x.id for x in client.groups()]
    with pytest.raises(benchd.NotFound) as e:
        client.destroy_group(g.id)
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_models_and_evict(client: benchd.Client, results: dict[str, benchd.Job]) -> None:
    models = client.models(device="cpu:0")
    assert len(models) >= 1
    df = models.to_pandas()
    assert {"key", "device", "model", "precision", "parameter_count", "bytes"} <= set(df.columns)
    key = models[0].key
    assert client.evict(key) == 1
    assert key not in [m.key for m in client.models()]
    client.evict(device="cpu:0")
    assert client.models(device="cpu:0").to_pandas().empty


def test_jobs_filters_paging_and_get(client: benchd.Client,
                                     results: dict[str, benchd.Job]) -> None:
    everything = client.jobs(limit=1000)
    ids = [j.id for j in everything]
    assert ids == sorted(ids, key=int, reverse=True)  # newest first
    page = client.jobs_page(page_size=2)
    assert len(page) == 2 and page.next_page_token
    paged = [j.id for j in client.iter_jobs(page_size=2)]
    assert paged == ids
    assert [j.id for j in client.jobs(limit=3)] == ids[:3]
    profiles = client.jobs(kind="profile")
    assert [j.id for j in profiles] == [results["profile"].id] or \
        all(j.kind == "profile" for j in profiles)
    on_cpu1 = client.jobs(device="cpu:1")
    assert results["collective"].id in [j.id for j in on_cpu1]
    assert all("cpu:1" in j.devices for j in on_cpu1)
    done = client.jobs(state="succeeded", kind="benchmark")
    assert all(j.state == benchd.JobState.SUCCEEDED and j.kind == "benchmark" for j in done)
    df = everything.to_pandas()
    assert list(df.columns[:4]) == ["job_id", "kind", "state", "devices"]
    got = client.job(int(results["tiny-fp32"].id))
    assert got.id == results["tiny-fp32"].id and got.state == benchd.JobState.SUCCEEDED
    assert isinstance(got.result, benchd.BenchmarkResult)


def test_cancel_and_job_failed(client: benchd.Client) -> None:
    job = client.benchmark(**{**TINY, "steps": 100000})
    job.cancel()
    job.wait(timeout=60, progress=False)
    assert job.state == benchd.JobState.CANCELLED
    with pytest.raises(benchd.JobFailed) as e:
        job.result
    assert e.value.state == "cancelled" and e.value.job_id == job.id


def test_wait_timeout_and_not_done(client: benchd.Client) -> None:
    job = client.benchmark(**{**TINY, "steps": 100000})
    try:
        with pytest.raises(benchd.WaitTimeout):
            job.wait(timeout=0.5, progress=False)
        with pytest.raises(benchd.JobNotDone):
            job.result
    finally:
        job.cancel()
        job.wait(timeout=60, progress=False)


def test_server_refusals_keep_message_code_field(client: benchd.Client) -> None:
    with pytest.raises(benchd.InvalidArgument) as e:
        client.benchmark(preset="nope")
    assert e.value.field == "benchmark.model.preset"
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message.startswith("benchmark.model.preset: unknown preset 'nope'")
    with pytest.raises(benchd.InvalidArgument) as e2:
        client.benchmark(preset="tiny", device="cuda:0")
    assert e2.value.field == "device" and "cpu:0, cpu:1" in e2.value.message
    with pytest.raises(benchd.FailedPrecondition) as e3:
        client.memory(preset="tiny")  # memory needs CUDA
    assert e3.value.field == "memory" and "CUDA" in e3.value.message
    with pytest.raises(benchd.NotFound):
        client.job(999999)
    with pytest.raises(benchd.InvalidArgument) as e4:
        client.job("abc")
    assert e4.value.field == "job_id"


def test_memory_snapshot_reads_the_pickle(client: benchd.Client, daemon: Daemon,
                                          results: dict[str, benchd.Job]) -> None:
    # No CUDA here: put the committed snapshot fixture among a finished job's
    # artifacts, where the daemon serves it as it would a memory job's.
    job = client.job(results["profile"].id)
    dest = os.path.join(daemon.data_dir, "artifacts", job.id, "memory.pickle")
    shutil.copyfile(os.path.join(FIXTURES, "snapshot.pickle"), dest)
    snap = job.memory_snapshot("memory.pickle")
    assert set(snap) >= {"segments", "device_traces", "external_annotations"}
    with open(os.path.join(FIXTURES, "expected.json")) as f:
        assert len(snap["device_traces"][0]) == json.load(f)["entries"]
    assert job.memory_snapshot() == snap  # the only .pickle
    with pytest.raises(benchd.ArgumentError):
        results["tiny-fp32"].memory_snapshot()  # no pickle there


def test_async_client(daemon: Daemon) -> None:
    async def go() -> None:
        async with benchd.AsyncClient(daemon.address) as c:
            node = await c.node()
            assert node.device_names == ["cpu:0", "cpu:1"]
            job = await c.benchmark(**TINY, precision="fp32")
            kinds = []
            async for e in job.events():
                kinds.append(e.kind)
            assert kinds[-1] == "result" and job.state == benchd.JobState.SUCCEEDED
            await job.wait(progress=False)
            assert job.result.to_pandas()["step_ms"].notna().all()
            jobs = await c.jobs(limit=2)
            assert jobs[0].id == job.id
            assert (await c.job(job.id)).state == benchd.JobState.SUCCEEDED
            with pytest.raises(benchd.InvalidArgument):
                await c.benchmark(preset="nope")
            with pytest.raises(benchd.ArgumentError):
                await c.benchmark(mode="sideways")
            arts = await c.artifacts(job.id)
            assert len(arts) == 0
    asyncio.run(go())


def test_estimate(client: benchd.Client, daemon: Daemon) -> None:
    # CS336 memory_profiling (d): one residual-stream tensor of the 2.7B model
    # at batch 4, context 256, in single precision: 4 x 256 x 2560 x 4 B.
    e = client.estimate(preset="2.7B", batch_size=4, context_length=256, mode="train_step",
                        precision="bf16")
    assert isinstance(e, benchd.MemoryEstimate)
    assert e.residual_stream_bytes == 10_485_760
    assert e.term("adamw_state").bytes == 8 * 3_406_809_600
    assert e.proto.request.model.d_model == 2560  # resolved
    assert e.total_bytes >= 16 * 3_406_809_600 and e.peak_phase in ("forward", "backward")
    df = e.to_pandas()
    assert {"parameters", "layer.ffn_hidden", "residual_stream"} <= set(df["term"])
    assert (df["bytes"] > 0).all() and df["formula"].str.len().min() > 0
    # Sharding: ZeRO-3 over 8 replicas divides the parameters.
    z3 = client.estimate(preset="small", mode="train_step", data_parallel=8, zero_stage=3)
    assert z3.term("parameters").per_device_bytes == 4 * 128_625_408 // 8
    assert z3.proto.devices == 8
    with pytest.raises(benchd.InvalidArgument, match="sharding.zero_stage: expected 0..3, got 5"):
        client.estimate(preset="small", zero_stage=5)
    with pytest.raises(benchd.ArgumentTypeError):
        client.estimate(preset="small", data_parallel="eight")
    with pytest.raises(benchd.ArgumentTypeError, match="unexpected keyword argument 'device'"):
        client.estimate(preset="small", device="cuda:0")
    a = asyncio.run(_estimate_async(daemon.address))
    assert a.total_bytes == client.estimate(preset="tiny").total_bytes


def test_force_reaches_the_spec(client: benchd.Client) -> None:
    # A CPU is never refused by the memory check; force is stored as given.
    job = client.benchmark(**TINY, force=True)
    assert job.spec.force
    assert job.wait(timeout=300).state == benchd.JobState.SUCCEEDED
    with pytest.raises(benchd.ArgumentTypeError):
        client.benchmark(**TINY, force="yes")


async def _estimate_async(address: str) -> benchd.MemoryEstimate:
    async with benchd.AsyncClient(address) as c:
        return await c.estimate(preset="tiny")
