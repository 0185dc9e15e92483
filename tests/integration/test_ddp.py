"""Data-parallel training on CPU workers (Gloo) through the real daemon: every
variant with both optimizers on 2 and 4 ranks trains the same model on the
same data (the runs' losses agree), every rank ends with the same parameters,
the calls and bytes per step are each variant's, the sharded optimizer keeps
a 1/world share of AdamW's state, every run's profiled step gives each rank
a Kineto trace and a timeline whose communication lane is the Gloo calls,
the overhead model is fitted and predicts every adamw row, and bad requests
are refused naming the field. (Equality with one process on the global batch is worker/ddp's
ddp_test; the daemon's aggregation is server/ddp_job_test.)"""
import grpc
import pytest

from conftest import bench_pb2, cpu_daemon, wait_for_state

DEVICES = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
FINAL = [bench_pb2.JOB_STATE_SUCCEEDED, bench_pb2.JOB_STATE_FAILED, bench_pb2.JOB_STATE_CANCELLED]
ADAMW, SHARDED = bench_pb2.DDP_OPTIMIZER_ADAMW, bench_pb2.DDP_OPTIMIZER_SHARDED_ADAMW


@pytest.fixture(scope="module")
def cpu4():
    with cpu_daemon(DEVICES, "benchd-ddp-") as d:
        yield d


def spec(devices, **ddp):
    step = bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(vocab_size=97, d_model=32, d_ff=64, num_layers=2, num_heads=4),
        context_length=16, warmup_steps=1, measure_steps=2, seed=5)
    return bench_pb2.JobSpec(ddp=bench_pb2.DdpSpec(
        target=bench_pb2.CollectiveTarget(devices=devices), step=step, **ddp))


def run(d, s):
    job = d.stub.Submit(bench_pb2.SubmitRequest(spec=s), timeout=30)
    return wait_for_state(d.stub, job.id, FINAL, timeout=600)


@pytest.mark.parametrize("world", [2, 4])
def test_every_variant_and_optimizer_trains_the_same_model_on_every_rank(cpu4, world):
    job = run(cpu4, spec(DEVICES[:world], global_batch_size=8, bucket_mb=[0.004, 0.03],
                         optimizers=[ADAMW, SHARDED]))
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (job.error_message, cpu4.log())
    assert job.kind == bench_pb2.JOB_KIND_DDP and list(job.devices) == DEVICES[:world]
    r = job.result.ddp
    assert r.world_size == world and r.global_batch_size == 8
    assert r.spec.step.batch_size == 8 // world
    assert r.group.transient and r.timer == "host_steady_clock"
    assert r.parameter_count > 10000 and r.versions.torch
    labels = [(row.variant, row.bucket_mb, row.optimizer) for row in r.rows]
    V = bench_pb2
    assert labels == [(v, mb, o) for v, mb in [(V.DDP_VARIANT_NAIVE, 0), (V.DDP_VARIANT_FLAT, 0),
                                              (V.DDP_VARIANT_OVERLAP, 0),
                                              (V.DDP_VARIANT_BUCKETED, 0.004),
                                              (V.DDP_VARIANT_BUCKETED, 0.03)]
                      for o in (ADAMW, SHARDED)]
    assert len(r.compute_only.step_seconds) == 2 and r.compute_only.exposed_comm_seconds == 0
    param_bytes = 4 * r.parameter_count
    rows = {(row.variant, row.bucket_mb, row.optimizer): row for row in r.rows}
    tensors = rows[(V.DDP_VARIANT_NAIVE, 0, ADAMW)].calls_per_step  # one all_reduce per parameter
    assert tensors > 10
    small = rows[(V.DDP_VARIANT_BUCKETED, 0.004, ADAMW)].buckets
    large = rows[(V.DDP_VARIANT_BUCKETED, 0.03, ADAMW)].buckets
    assert tensors > small > large >= 1, (tensors, small, large)
    for key, row in rows.items():
        variant, mb, optimizer = key
        assert row.ranks_agree, key
        assert [x.rank for x in row.ranks] == list(range(world))
        assert len(row.step_seconds) == 2 and row.step.median > 0
        # The same model, data and steps: the runs' losses agree to rounding
        # (the compute-only run's ranks train apart, on their own gradients).
        assert row.loss == pytest.approx(r.rows[0].loss, rel=1e-4), key
        assert row.loss != r.compute_only.loss
        calls = {V.DDP_VARIANT_NAIVE: tensors, V.DDP_VARIANT_FLAT: 1,
                 V.DDP_VARIANT_OVERLAP: tensors, V.DDP_VARIANT_BUCKETED: row.buckets}[variant]
        if optimizer == SHARDED:
            # One broadcast per owner; every parameter's bytes once more.
            assert row.calls_per_step == calls + world, key
            assert row.bytes_per_step == 2 * param_bytes, key
            # m and v of a 1/world share, balanced by bytes.
            assert row.unsharded_optimizer_state_bytes == 2 * param_bytes
            assert 2 * param_bytes / world <= row.optimizer_state_bytes < 2 * param_bytes * 0.8, key
        else:
            assert row.calls_per_step == calls, key
            assert row.bytes_per_step == param_bytes, key
            assert row.optimizer_state_bytes == 2 * param_bytes, key
        # The model predicts the gradient synchronisation of adamw rows only,
        # when the sweep could be fitted (below).
        fitted = not r.overhead_model.unavailable
        assert row.HasField("predicted_exposed_comm_seconds") == (optimizer == ADAMW and fitted), \
            (key, r.overhead_model.unavailable)
        assert row.predicted_exposed_comm_seconds >= 0

    # Timelines: one profiled step per run and rank, its trace kept.
    artifacts = {a.name for a in cpu4.stub.ListArtifacts(
        bench_pb2.ListArtifactsRequest(job_id=job.id), timeout=10).artifacts}
    assert r.timeline_artifact == "ddp-timeline.svg" and r.timeline_artifact in artifacts
    for n, row in enumerate([r.compute_only, *r.rows]):
        for rank in row.ranks:
            t = rank.timeline
            assert t.source == "cpu_operators" and t.step_seconds > 0, (n, rank.rank)
            assert t.trace_artifact == f"ddp-run{n}-rank{rank.rank}.trace.json"
            assert t.trace_artifact in artifacts
            lanes = {span.lane for span in t.spans}
            assert bench_pb2.DDP_LANE_COMPUTE in lanes and t.compute_seconds > 0
            # Communication (gloo:all_reduce ranges) in every synchronised run, none without.
            assert (bench_pb2.DDP_LANE_COMMUNICATION in lanes) == (n > 0), (n, rank.rank)
            assert (t.comm_seconds > 0) == (n > 0)
            assert 0 <= t.comm_overlapped_seconds <= t.comm_seconds
            assert all(0 <= sp.start_seconds < sp.end_seconds <= t.step_seconds + 1e-9
                       for sp in t.spans)
    trace = b"".join(c.data for c in cpu4.stub.FetchArtifact(bench_pb2.FetchArtifactRequest(
        job_id=job.id, name="ddp-run1-rank0.trace.json"), timeout=30))
    assert b'"traceEvents"' in trace and b"gloo:all_reduce" in trace

    # The overhead model: fitted to the group's sweep (4 KiB .. 4 MiB on a CPU).
    # Two ranks on these two cores always gave a fit; four ranks' Gloo sweep
    # on a loaded CI machine once could not be fitted: then the result says
    # why and predicts nothing (checked above), and the fit is not checked.
    m = r.overhead_model
    if world == 4 and m.unavailable:
        assert "fit" in m.unavailable or "sweep" in m.unavailable, m.unavailable
        return
    assert not m.unavailable, m.unavailable
    assert list(m.sweep_bytes) == [4096 * 4**k for k in range(6)]
    assert len(m.sweep_seconds) == 6 and all(t > 0 for t in m.sweep_seconds)
    assert m.bandwidth_bytes_per_second > 0 and m.per_call_seconds >= 0
    assert m.gradient_bytes == param_bytes and m.backward_seconds > 0
    assert m.predicted_best_bucket_mb > 0 and "o + s / w" in m.formula
    assert m.measured_best_bucket_mb in (0.004, 0.03)
    assert m.best_bucket_ratio == pytest.approx(m.predicted_best_bucket_mb / m.measured_best_bucket_mb)


def test_without_traces_no_profiled_step_and_no_artifacts(cpu4):
    job = run(cpu4, spec(DEVICES[:2], variants=[bench_pb2.DDP_VARIANT_FLAT], traces=False))
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (job.error_message, cpu4.log())
    r = job.result.ddp
    assert not r.spec.traces and not r.timeline_artifact
    assert all(not rank.HasField("timeline") for row in [r.compute_only, *r.rows]
               for rank in row.ranks)
    assert not cpu4.stub.ListArtifacts(bench_pb2.ListArtifactsRequest(job_id=job.id),
                                       timeout=10).artifacts


def test_bad_requests_are_refused_naming_the_field(cpu4):
    def refused(s):
        with pytest.raises(grpc.RpcError) as e:
            cpu4.stub.Submit(bench_pb2.SubmitRequest(spec=s), timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
        return e.value.details()

    assert refused(spec(DEVICES[:3], global_batch_size=8)).startswith(
        "ddp.global_batch_size: 8 does not split evenly over 3 ranks")
    assert refused(spec(DEVICES[:2], bucket_mb=[0])).startswith("ddp.bucket_mb[0]: expected 0 < MB")
    assert refused(spec(DEVICES[:1])).startswith("ddp.target.devices: 1 device (cpu:0)")
    assert refused(spec(["cpu:0", "cpu:9"])).startswith("ddp.target.devices")
    s = spec(DEVICES[:2])
    s.ddp.step.attention = bench_pb2.ATTENTION_IMPL_SDPA
    assert refused(s).startswith("ddp.step.attention: attention sdpa changes the model's ops")
    s = spec(DEVICES[:2], variants=[bench_pb2.DDP_VARIANT_REDUCER])
    assert refused(s).startswith("ddp.variants[0]: reducer (c10d's Reducer")
    bf16 = bench_pb2.DDP_GRADIENT_COMPRESSION_BF16
    assert refused(spec(DEVICES[:2], gradient_compressions=[bf16, bf16])) == \
        "ddp.gradient_compressions[1]: bf16 is listed twice"


def test_a_resident_group_is_used_and_stays(cpu4):
    group = cpu4.stub.CreateGroup(bench_pb2.CreateGroupRequest(
        devices=DEVICES[:2], backend=bench_pb2.COLLECTIVE_BACKEND_GLOO), timeout=120)
    try:
        # Through the fused AdamW kernel, whole and sharded: the same update.
        s = spec([], variants=[bench_pb2.DDP_VARIANT_FLAT], optimizers=[ADAMW, SHARDED])
        s.ddp.target.group = group.id
        s.ddp.step.batch_size = 2
        s.ddp.step.optimizer_impl = bench_pb2.OPTIMIZER_IMPL_FUSED
        job = run(cpu4, s)
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (job.error_message, cpu4.log())
        r = job.result.ddp
        assert r.spec.step.optimizer_impl == bench_pb2.OPTIMIZER_IMPL_FUSED
        assert r.group.was_resident and r.group.group == group.id and not r.group.transient
        assert r.global_batch_size == 4 and len(r.rows) == 2
        assert all(row.ranks_agree for row in r.rows)
        assert r.rows[1].loss == pytest.approx(r.rows[0].loss, rel=1e-5)
        after = next(g for g in cpu4.stub.ListGroups(bench_pb2.ListGroupsRequest(), timeout=10).groups
                     if g.id == group.id)
        assert after.state == bench_pb2.GROUP_STATE_READY and after.jobs_run == 1
    finally:
        cpu4.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id), timeout=60)


def test_autograd_runs_and_the_reducer_on_a_resident_group(cpu4):
    """step.autograd: every run through the autograd engine, gradients known
    final from its hooks, and c10d's Reducer (PyTorch DDP's engine) as a
    variant; the same model trained as by benchd's variants, on a resident
    group that stays usable after the Reducer has used it."""
    group = cpu4.stub.CreateGroup(bench_pb2.CreateGroupRequest(
        devices=DEVICES[:2], backend=bench_pb2.COLLECTIVE_BACKEND_GLOO), timeout=120)
    V = bench_pb2
    try:
        s = spec([], variants=[V.DDP_VARIANT_OVERLAP, V.DDP_VARIANT_BUCKETED, V.DDP_VARIANT_REDUCER],
                 bucket_mb=[0.004, 0.03], optimizers=[ADAMW, SHARDED])
        s.ddp.target.group = group.id
        s.ddp.step.batch_size = 4
        s.ddp.step.autograd = True
        job = run(cpu4, s)
        assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (job.error_message, cpu4.log())
        r = job.result.ddp
        assert r.spec.step.autograd
        rows = {(row.variant, row.bucket_mb, row.optimizer): row for row in r.rows}
        assert set(rows) == {(v, mb, o) for v, mb in [(V.DDP_VARIANT_OVERLAP, 0),
                                                      (V.DDP_VARIANT_BUCKETED, 0.004),
                                                      (V.DDP_VARIANT_BUCKETED, 0.03),
                                                      (V.DDP_VARIANT_REDUCER, 0.004),
                                                      (V.DDP_VARIANT_REDUCER, 0.03)]
                             for o in (ADAMW, SHARDED)}
        param_bytes = 4 * r.parameter_count
        for key, row in rows.items():
            assert row.ranks_agree, key
            assert row.loss == pytest.approx(r.rows[0].loss, rel=1e-4), key
            if key[0] == V.DDP_VARIANT_REDUCER and key[2] == ADAMW:
                # Its buckets, rebuilt in the order gradients became final, each one call.
                assert row.buckets >= 1 and row.calls_per_step == row.buckets, key
                assert row.bytes_per_step == param_bytes, key
                # Predicted when the sweep could be fitted (a loaded CI machine's
                # Gloo sweep sometimes cannot: the result then says why).
                assert row.HasField("predicted_exposed_comm_seconds") == \
                    (not r.overhead_model.unavailable), (key, r.overhead_model.unavailable)
        small = rows[(V.DDP_VARIANT_REDUCER, 0.004, ADAMW)].buckets
        large = rows[(V.DDP_VARIANT_REDUCER, 0.03, ADAMW)].buckets
        assert small > large >= 1, (small, large)
        # The gradient-ready times came from the engine's hooks.
        assert r.overhead_model.backward_seconds > 0 or r.overhead_model.unavailable
        # The group is still whole: a second job runs on it.
        again = spec([], variants=[V.DDP_VARIANT_FLAT], traces=False)
        again.ddp.target.group = group.id
        again.ddp.step.batch_size = 2
        job2 = run(cpu4, again)
        assert job2.state == bench_pb2.JOB_STATE_SUCCEEDED, (job2.error_message, cpu4.log())
        assert job2.result.ddp.rows[0].ranks_agree
    finally:
        cpu4.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id), timeout=60)


def test_the_overlapped_optimizer_trains_as_adamw(cpu4):
    """adamw_overlapped steps each parameter as its all-reduce ends: the same
    calls, bytes, state and training as adamw, and no prediction (the model
    does not know the optimizer's overlap)."""
    V = bench_pb2
    job = run(cpu4, spec(DEVICES[:2], variants=[V.DDP_VARIANT_OVERLAP, V.DDP_VARIANT_BUCKETED],
                         bucket_mb=[0.004], optimizers=[ADAMW, V.DDP_OPTIMIZER_ADAMW_OVERLAPPED],
                         traces=False))
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (job.error_message, cpu4.log())
    rows = {(row.variant, row.optimizer): row for row in job.result.ddp.rows}
    assert len(rows) == 4
    for variant in (V.DDP_VARIANT_OVERLAP, V.DDP_VARIANT_BUCKETED):
        plain, overlapped = rows[(variant, ADAMW)], rows[(variant, V.DDP_OPTIMIZER_ADAMW_OVERLAPPED)]
        assert overlapped.ranks_agree
        assert overlapped.loss == pytest.approx(plain.loss, rel=1e-5)
        assert (overlapped.calls_per_step, overlapped.bytes_per_step) == \
            (plain.calls_per_step, plain.bytes_per_step)
        assert overlapped.optimizer_state_bytes == plain.optimizer_state_bytes
        assert not overlapped.HasField("predicted_exposed_comm_seconds")


def test_bf16_gradients_halve_the_bytes_and_train_near_fp32(cpu4):
    """gradient_compressions none,bf16: every run twice, none first; the bf16
    rows move half the bytes in the same calls, their ranks agree, and their
    loss stays near the uncompressed run's (bf16's rounding of the mean
    gradient, not another training)."""
    V = bench_pb2
    job = run(cpu4, spec(DEVICES[:2], variants=[V.DDP_VARIANT_OVERLAP, V.DDP_VARIANT_BUCKETED],
                         bucket_mb=[0.004],
                         gradient_compressions=[V.DDP_GRADIENT_COMPRESSION_BF16,
                                                V.DDP_GRADIENT_COMPRESSION_NONE],
                         traces=False))
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (job.error_message, cpu4.log())
    r = job.result.ddp
    assert list(r.spec.gradient_compressions) == [V.DDP_GRADIENT_COMPRESSION_NONE,
                                                  V.DDP_GRADIENT_COMPRESSION_BF16]
    assert [(row.variant, row.gradient_compression) for row in r.rows] == [
        (v, c) for v in (V.DDP_VARIANT_OVERLAP, V.DDP_VARIANT_BUCKETED)
        for c in (V.DDP_GRADIENT_COMPRESSION_NONE, V.DDP_GRADIENT_COMPRESSION_BF16)]
    rows = {(row.variant, row.gradient_compression): row for row in r.rows}
    for variant in (V.DDP_VARIANT_OVERLAP, V.DDP_VARIANT_BUCKETED):
        plain = rows[(variant, V.DDP_GRADIENT_COMPRESSION_NONE)]
        bf16 = rows[(variant, V.DDP_GRADIENT_COMPRESSION_BF16)]
        assert plain.ranks_agree and bf16.ranks_agree
        assert plain.bytes_per_step == 4 * r.parameter_count
        assert bf16.bytes_per_step == 2 * r.parameter_count
        assert bf16.calls_per_step == plain.calls_per_step
        assert bf16.loss == pytest.approx(plain.loss, rel=1e-2)
