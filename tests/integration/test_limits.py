"""Limits on every size through real gRPC to a real daemon (common/limits.h):
a huge string, a huge list, an unknown field and a message over the receive
limit are refused with the status code and a message naming the field, what
came (never echoed whole) and the limit; the daemon serves on afterwards."""
import os
import re

import grpc
import pytest

from conftest import SRC, bench_pb2, wait_for_state

HUGE = 100 * 1024  # bytes: far over every string's limit, under the receive limit


def max_request_bytes():
    """kMaxRequestBytes as common/limits.h defines it (the one place it is set)."""
    with open(os.path.join(SRC, "common/limits.h")) as f:
        m = re.search(r"kMaxRequestBytes = ([0-9 *]+);", f.read())
    assert m, "kMaxRequestBytes not found in common/limits.h"
    value = 1
    for factor in m.group(1).split("*"):
        value *= int(factor)
    return value


def refused(call):
    with pytest.raises(grpc.RpcError) as e:
        r = call()
        if hasattr(r, "__next__"):
            list(r)  # a stream's status comes with its end
    return e.value


def tiny(**kw):
    return bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny"), measure_steps=2, warmup_steps=0), **kw)


def assert_still_serving(daemon):
    info = daemon.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10)
    assert info.devices[0].name == "cpu:0"
    job = daemon.stub.Submit(bench_pb2.SubmitRequest(spec=tiny()), timeout=30)
    done = wait_for_state(daemon.stub, job.id, {bench_pb2.JOB_STATE_SUCCEEDED,
                                                bench_pb2.JOB_STATE_FAILED}, timeout=120)
    assert done.state == bench_pb2.JOB_STATE_SUCCEEDED, done.error_message


def test_huge_strings_are_refused_naming_the_field_never_echoed(daemon):
    s, x = daemon.stub, "x" * HUGE
    cases = [
        (lambda: s.Submit(bench_pb2.SubmitRequest(spec=bench_pb2.JobSpec(
            benchmark=bench_pb2.BenchmarkSpec(model=bench_pb2.ModelConfig(preset=x))))),
         "benchmark.model.preset: expected a preset name such as small of at most 64 bytes"),
        (lambda: s.Submit(bench_pb2.SubmitRequest(spec=tiny(device=x))),
         "device: expected a device name such as cuda:0 of at most 32 bytes"),
        (lambda: s.Submit(bench_pb2.SubmitRequest(spec=bench_pb2.JobSpec(
            collective=bench_pb2.CollectiveSpec(devices=["cpu:0", x])))),
         "collective.devices[1]: expected a device name such as cuda:0 of at most 32 bytes"),
        (lambda: s.GetJob(bench_pb2.GetJobRequest(job_id=x)),
         "job_id: expected a job id such as 42 of at most 18 bytes"),
        (lambda: s.Watch(bench_pb2.WatchRequest(job_id=x)),
         "job_id: expected a job id such as 42 of at most 18 bytes"),
        (lambda: s.ListJobs(bench_pb2.ListJobsRequest(page_token=x)),
         "page_token: expected a ListJobs reply's next_page_token of at most 256 bytes"),
        (lambda: s.ListJobs(bench_pb2.ListJobsRequest(device=x)),
         "device: expected a device name such as cuda:0 of at most 32 bytes"),
        (lambda: s.EvictModel(bench_pb2.EvictModelRequest(key=x)),
         "key: expected a key as ListModels gives it of at most 256 bytes"),
        (lambda: s.FetchArtifact(bench_pb2.FetchArtifactRequest(job_id="1", name=x)),
         "name: expected an artifact name as ListArtifacts gives it of at most 255 bytes"),
        (lambda: s.CreateGroup(bench_pb2.CreateGroupRequest(devices=["cpu:0", x])),
         "devices[1]: expected a device name such as cuda:0 of at most 32 bytes"),
        (lambda: s.DestroyGroup(bench_pb2.DestroyGroupRequest(group=x)),
         "group: expected a group id such as g1 of at most 32 bytes"),
    ]
    for call, says in cases:
        e = refused(call)
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (says, e.code(), e.details()[:200])
        assert e.details().startswith(says), (says, e.details()[:300])
        # What came, quoted cut short with its length: never the whole string back.
        assert e.details().endswith(f"'{'x' * 64}'... ({HUGE} bytes)"), e.details()[:300]
        assert len(e.details()) < 300
    assert_still_serving(daemon)


def test_huge_lists_and_numbers_out_of_range_are_refused_naming_the_field(daemon):
    s = daemon.stub
    cases = [
        (bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(
            devices=["cpu:0", "cpu:1"], sizes_bytes=[1024] * 10000)),
         "collective.sizes_bytes: expected at most 64 entries (sizes of one request), got 10000"),
        (bench_pb2.JobSpec(memory=bench_pb2.MemorySpec(
            step=bench_pb2.BenchmarkSpec(model=bench_pb2.ModelConfig(preset="tiny")),
            context_lengths=[16] * 5000)),
         "memory.context_lengths: expected at most 64 entries (one entry per run of the sweep), "
         "got 5000"),
        (bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(
            targets=[bench_pb2.CollectiveTarget(group="g1")] * 17)),
         "collective.targets: expected at most 16 entries (targets of one request), got 17"),
        (bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
            model=bench_pb2.ModelConfig(preset="tiny"), batch_size=1 << 40)),
         "benchmark.batch_size: expected 1..65536, got 1099511627776"),
        (bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(
            devices=["cpu:0", "cpu:1"], sizes_bytes=[1024, 1 << 62])),
         "collective.sizes_bytes[1]: expected 1..17179869184, got 4611686018427387904"),
    ]
    for spec, says in cases:
        e = refused(lambda: s.Submit(bench_pb2.SubmitRequest(spec=spec)))
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (says, e.details()[:200])
        assert e.details() == says
    e = refused(lambda: s.CreateGroup(bench_pb2.CreateGroupRequest(devices=["cpu:0"] * 1000)))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details() == "devices: expected at most 64 entries (one device per rank), got 1000"
    e = refused(lambda: s.ListJobs(bench_pb2.ListJobsRequest(page_size=1001)))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and e.details().startswith("page_size: ")
    assert_still_serving(daemon)


def test_a_field_this_daemon_does_not_know_is_refused_not_stored(daemon):
    # Field 111 (varint 1) inside the benchmark spec, as a newer client would send it.
    raw = tiny().benchmark.SerializeToString() + b"\xf8\x06\x01"
    spec = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec.FromString(raw))
    e = refused(lambda: daemon.stub.Submit(bench_pb2.SubmitRequest(spec=spec)))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details().startswith(
        "benchmark: field number 111 is not a field of benchd.v1.BenchmarkSpec"), e.details()
    assert len(daemon.stub.ListJobs(bench_pb2.ListJobsRequest()).jobs) == 0


def test_a_message_over_the_receive_limit_is_refused_before_it_is_read(daemon):
    s = daemon.stub
    limit = max_request_bytes()
    # Over gRPC's 4 MB default, and just over the limit benchd sets (kMaxRequestBytes).
    for size in (5 << 20, limit + 1024):
        spec = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
            model=bench_pb2.ModelConfig(preset="x" * size)))
        e = refused(lambda: s.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=60))
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (size, e.code(), e.details()[:200])
        assert "larger than max" in e.details(), e.details()[:200]
        assert str(limit) in e.details(), (limit, e.details()[:200])
    # A request under it reaches the checks, which name the field.
    e = refused(lambda: s.GetJob(bench_pb2.GetJobRequest(job_id="1" * (limit // 2))))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and e.details().startswith("job_id: ")
    assert_still_serving(daemon)
