"""ListJobs through the real daemon: pages newest first that follow one
another, filters by state, kind and device (a collective counts on each of
its devices), and refusals that name the field."""
import json

import grpc
import pytest

from conftest import bench_pb2, cpu_daemon, wait_for_state

TINY = bench_pb2.BenchmarkSpec(model=bench_pb2.ModelConfig(preset="tiny"), batch_size=1,
                               context_length=8, warmup_steps=0, measure_steps=1)
FINAL = [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED, bench_pb2.JOB_STATE_CANCELLED]


@pytest.fixture(scope="module")
def two_cpus():
    with cpu_daemon(["cpu:0", "cpu:1"], "benchd-list-") as d:
        ids = {}

        def submit(name, spec):
            ids[name] = d.stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30).id
            wait_for_state(d.stub, ids[name], FINAL, timeout=120)

        submit("b0", bench_pb2.JobSpec(device="cpu:0", benchmark=TINY))
        submit("b1", bench_pb2.JobSpec(device="cpu:1", benchmark=TINY))
        submit("coll", bench_pb2.JobSpec(collective=bench_pb2.CollectiveSpec(
            devices=["cpu:0", "cpu:1"], sizes_bytes=[4096], warmup_iters=0, iters=1)))
        submit("p0", bench_pb2.JobSpec(device="cpu:0", profile=bench_pb2.ProfileSpec(step=TINY)))
        submit("b0b", bench_pb2.JobSpec(device="cpu:0", benchmark=TINY))
        yield d, ids


def list_ids(d, **request):
    return [j.id for j in d.stub.ListJobs(bench_pb2.ListJobsRequest(**request), timeout=10).jobs]


def test_pages_follow_one_another_newest_first(two_cpus):
    d, ids = two_cpus
    order = [ids[n] for n in ("b0b", "p0", "coll", "b1", "b0")]
    seen, token, pages = [], "", 0
    while True:
        page = d.stub.ListJobs(bench_pb2.ListJobsRequest(page_size=2, page_token=token), timeout=10)
        assert len(page.jobs) <= 2
        seen += [j.id for j in page.jobs]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert seen == order and pages == 3
    assert list_ids(d) == order  # the default page holds them all


def test_filters_by_kind_device_and_state(two_cpus):
    d, ids = two_cpus
    coll = d.stub.GetJob(bench_pb2.GetJobRequest(job_id=ids["coll"]), timeout=10)
    assert coll.kind == bench_pb2.JOB_KIND_COLLECTIVE and list(coll.devices) == ["cpu:0", "cpu:1"]
    assert coll.state == bench_pb2.JOB_STATE_SUCCEEDED, coll.error_message
    assert list_ids(d, kind=bench_pb2.JOB_KIND_COLLECTIVE) == [ids["coll"]]
    assert list_ids(d, kind=bench_pb2.JOB_KIND_PROFILE) == [ids["p0"]]
    assert list_ids(d, device="cpu:1") == [ids["coll"], ids["b1"]]
    assert list_ids(d, device="cpu:0", kind=bench_pb2.JOB_KIND_BENCHMARK) == [ids["b0b"], ids["b0"]]
    assert list_ids(d, state=bench_pb2.JOB_STATE_SUCCEEDED) == list_ids(d)
    assert list_ids(d, state=bench_pb2.JOB_STATE_FAILED) == []
    # Paging within a filter.
    first = d.stub.ListJobs(bench_pb2.ListJobsRequest(page_size=1, device="cpu:0"), timeout=10)
    second = d.stub.ListJobs(bench_pb2.ListJobsRequest(page_size=1, device="cpu:0",
                                                       page_token=first.next_page_token), timeout=10)
    assert [j.id for j in list(first.jobs) + list(second.jobs)] == [ids["b0b"], ids["p0"]]


@pytest.mark.parametrize("request_fields,field", [
    ({"page_size": 1001}, "page_size: expected 0..1000"),
    ({"page_size": -1}, "page_size: expected 0..1000"),
    ({"device": "gpu:0"}, "device: 'gpu:0' is not a device name"),
    ({"device": "cpu:7"}, "device: cpu:7 is not served by this daemon; it serves cpu:0, cpu:1"),
    ({"state": 42}, "state: unknown job state 42"),
    ({"kind": 42}, "kind: unknown job kind 42"),
    ({"page_token": "garbage"}, "page_token: not a token this daemon gave"),
])
def test_bad_requests_name_the_field(two_cpus, request_fields, field):
    d, _ = two_cpus
    with pytest.raises(grpc.RpcError) as e:
        d.stub.ListJobs(bench_pb2.ListJobsRequest(**request_fields), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in e.value.details(), e.value.details()


def test_a_token_is_refused_with_other_filters(two_cpus):
    d, _ = two_cpus
    page = d.stub.ListJobs(bench_pb2.ListJobsRequest(page_size=1, device="cpu:0"), timeout=10)
    assert page.next_page_token
    with pytest.raises(grpc.RpcError) as e:
        d.stub.ListJobs(bench_pb2.ListJobsRequest(page_size=1, device="cpu:1",
                                                  page_token=page.next_page_token), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "made for other filters" in e.value.details()


def test_benchctl_list_pages_and_filters(two_cpus):
    d, ids = two_cpus
    r = d.benchctl("list", "--limit", "3", "--json", check=0)
    assert [j["id"] for j in json.loads(r.stdout)["jobs"]] == [ids["b0b"], ids["p0"], ids["coll"]]
    r = d.benchctl("list", "--device", "cpu:1", "--kind", "collective", "--json", check=0)
    assert [j["id"] for j in json.loads(r.stdout)["jobs"]] == [ids["coll"]]
    r = d.benchctl("list", "--kind", "sideways", check=2)
    assert "--kind" in r.stderr
    table = d.benchctl("list", "--device", "cpu:1", check=0).stdout
    assert "cpu:0,cpu:1" in table and "collective" in table
