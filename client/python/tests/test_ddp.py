"""Data-parallel training (Client.ddp, `benchctl submit ddp`): the JobSpec
the keywords make and their refusals (no daemon), the result's frames from a
hand-made DdpResult, and a real job on the CPU daemon's two workers over a
transient Gloo group."""
from __future__ import annotations

import math
import typing

import pytest

import benchd
from benchd import _args as A
from benchd import _common as C
from benchd._results import ddp_run_label
from benchd.v1 import bench_pb2 as pb

NOWHERE = "127.0.0.1:1"
# A model small enough for two single-threaded CPU ranks to run every
# variant with both optimizers in seconds.
SMALL = dict(vocab_size=97, d_model=32, d_ff=64, num_layers=2, num_heads=4, context_length=16,
             warmup_steps=1, steps=2)


@pytest.fixture
def offline() -> typing.Iterator[benchd.Client]:
    with benchd.Client(NOWHERE, connect_timeout=1) as c:
        yield c


# ------------------------------------------------------------------ the spec

def test_spec_mirrors_benchctl_flags() -> None:
    spec = A.ddp_spec(dict(devices="cpu:0, cpu:1", backend="gloo", precision="bf16",
                           global_batch=8, seed=3, tf32=True,
                           variants="naive,DDP_VARIANT_FLAT,bucketed", bucket_mb=["1", 2.5],
                           optimizers=["adamw", "sharded_adamw"], group_timeout=30, **SMALL))
    d = spec.ddp
    assert not spec.device and spec.WhichOneof("kind") == "ddp"
    assert list(d.target.devices) == ["cpu:0", "cpu:1"] and not d.target.group
    assert d.target.backend == pb.COLLECTIVE_BACKEND_GLOO
    m = d.step.model
    assert (m.vocab_size, m.d_model, m.d_ff, m.num_layers, m.num_heads) == (97, 32, 64, 2, 4)
    assert d.step.precision == pb.PRECISION_BF16 and d.step.allow_tf32
    assert (d.step.context_length, d.step.warmup_steps, d.step.measure_steps, d.step.seed) == \
        (16, 1, 2, 3)
    assert not d.step.HasField("batch_size") and d.global_batch_size == 8
    assert list(d.variants) == [pb.DDP_VARIANT_NAIVE, pb.DDP_VARIANT_FLAT,
                                pb.DDP_VARIANT_BUCKETED]
    assert list(d.bucket_mb) == [1.0, 2.5]
    assert list(d.optimizers) == [pb.DDP_OPTIMIZER_ADAMW, pb.DDP_OPTIMIZER_SHARDED_ADAMW]
    assert d.timeout_seconds == 30.0
    assert d.step.optimizer_impl == pb.OPTIMIZER_IMPL_UNSPECIFIED
    fused = A.ddp_spec(dict(devices="cpu:0,cpu:1", optimizer_impl="fused")).ddp
    assert fused.step.optimizer_impl == pb.OPTIMIZER_IMPL_FUSED
    # traces: unset = the daemon's default (on); traces=False is --no-traces.
    assert not d.HasField("traces")
    off = A.ddp_spec(dict(devices="cpu:0,cpu:1", traces=False)).ddp
    assert off.HasField("traces") and not off.traces
    # autograd: the step through the engine; reducer takes bucket sizes.
    reducer = A.ddp_spec(dict(devices="cpu:0,cpu:1", autograd=True, variants="reducer",
                              bucket_mb=25)).ddp
    assert reducer.step.autograd and list(reducer.variants) == [pb.DDP_VARIANT_REDUCER]
    assert list(reducer.bucket_mb) == [25.0]
    assert ddp_run_label(pb.DDP_VARIANT_REDUCER, 25, pb.DDP_OPTIMIZER_ADAMW) == "reducer 25 MB"


def test_spec_unset_stays_unset_and_the_sharded_shortcut() -> None:
    d = A.ddp_spec(dict(group="g1", preset="tiny", batch_size=2, sharded_optimizer=True)).ddp
    assert d.target.group == "g1" and not d.target.devices
    assert d.target.backend == pb.COLLECTIVE_BACKEND_UNSPECIFIED
    assert d.step.batch_size == 2 and not d.HasField("global_batch_size")
    assert list(d.optimizers) == [pb.DDP_OPTIMIZER_SHARDED_ADAMW]
    assert not d.variants and not d.bucket_mb and not d.HasField("timeout_seconds")
    assert not d.step.HasField("warmup_steps") and not d.step.HasField("measure_steps")
    assert d.step.mode == pb.BENCHMARK_MODE_UNSPECIFIED  # the daemon writes train_step out


@pytest.mark.parametrize("kwargs, argument, match", [
    (dict(group="g1", devices=["cpu:0", "cpu:1"]), "group", "group and devices: give one"),
    (dict(), "devices", "devices: give the ranks' devices in rank order"),
    (dict(group="g1", backend="nccl"), "backend", "a resident group has its own backend"),
    (dict(devices="cpu:0,cpu:1", global_batch=8, batch_size=4), "global_batch",
     "global_batch and batch_size: give one"),
    (dict(devices="cpu:0,cpu:1", bucket_mb=[10, 0]), "bucket_mb[1]",
     r"above 0 and at most 1e\+06, got 0.0"),
    (dict(devices="cpu:0,cpu:1", bucket_mb="2e6"), "bucket_mb[0]", "at most"),
    (dict(devices="cpu:0,cpu:1", bucket_mb="ten"), "bucket_mb[0]", "expected a number"),
    (dict(devices="cpu:0,cpu:1", variants="naive", bucket_mb=25), "bucket_mb",
     "only the bucketed and reducer variants have buckets"),
    (dict(devices="cpu:0,cpu:1", sharded_optimizer=True, optimizers="adamw"),
     "sharded_optimizer", "sharded_optimizer and optimizers: give one"),
    (dict(devices="cpu:0,cpu:1", seed=-1), "seed", "0 or more"),
])
def test_spec_refusals_name_the_argument(kwargs: dict[str, object], argument: str,
                                         match: str) -> None:
    with pytest.raises(benchd.ArgumentError, match=match) as e:
        A.ddp_spec(kwargs)
    assert e.value.argument == argument
    assert str(e.value).startswith(argument.split("[")[0])


@pytest.mark.parametrize("kwargs, argument, accepted", [
    (dict(variants="naive,ring"), "variants[1]",
     ["naive", "flat", "overlap", "bucketed", "reducer"]),
    (dict(optimizers=["sgd"]), "optimizers[0]", ["adamw", "sharded_adamw", "adamw_overlapped"]),
    (dict(backend="mpi"), "backend", ["nccl", "gloo"]),
    (dict(precision="fp8"), "precision", ["fp32", "bf16", "fp16"]),
])
def test_unknown_enum_values_list_the_descriptors_values(
        offline: benchd.Client, kwargs: dict[str, object], argument: str,
        accepted: list[str]) -> None:
    with pytest.raises(benchd.ArgumentError) as e:
        offline.ddp(devices="cpu:0,cpu:1", **kwargs)  # type: ignore[arg-type]
    assert not isinstance(e.value, benchd.RpcError)  # refused before any RPC
    assert e.value.argument == argument and e.value.accepted == accepted


@pytest.mark.parametrize("keyword, hint", [
    ("fused_ops", "model's ops"), ("attention", "model's ops"),
    ("global_batch_size", "give global_batch"), ("timeout", "give group_timeout"),
    ("optimizer", "give optimizers"), ("device", "give devices"), ("mode", "train_step"),
])
def test_keywords_a_ddp_job_has_not_say_what_instead(offline: benchd.Client, keyword: str,
                                                     hint: str) -> None:
    with pytest.raises(benchd.ArgumentTypeError, match=hint) as e:
        offline.ddp(devices="cpu:0,cpu:1", **{keyword: True})  # type: ignore[arg-type]
    assert e.value.argument == keyword


# ------------------------------------------------------------------ the result

def _row(variant: int, bucket_mb: float, optimizer: int, median: float, agree: bool = True,
         state: int = 8000) -> pb.DdpRow:
    row = pb.DdpRow(variant=variant, bucket_mb=bucket_mb, optimizer=optimizer,  # type: ignore[arg-type]
                    step_seconds=[median, median + 0.001],
                    exposed_comm_seconds=median - 0.010,
                    exposed_comm_fraction=(median - 0.010) / median,
                    calls_per_step=20 if variant else 0, bytes_per_step=4000 if variant else 0,
                    buckets=1 if variant == pb.DDP_VARIANT_BUCKETED else 0, ranks_agree=agree,
                    optimizer_state_bytes=state, unsharded_optimizer_state_bytes=8000, loss=4.5)
    row.step.median = median
    row.step.p95 = median + 0.001
    for rank in range(2):
        row.ranks.add(rank=rank, device=f"cpu:{rank}", step_median_seconds=median,
                      comm_host_median_seconds=0.002 if variant else 0.0,
                      optimizer_state_bytes=state)
    return row


def _result() -> pb.DdpResult:
    r = pb.DdpResult(world_size=2, global_batch_size=8, parameter_count=1000, device_name="cpu",
                     timer="host_steady_clock")
    r.spec.target.devices.extend(["cpu:0", "cpu:1"])
    r.group.group = "t1"
    r.group.transient = True
    r.group.devices.extend(["cpu:0", "cpu:1"])
    r.compute_only.CopyFrom(_row(0, 0, pb.DDP_OPTIMIZER_ADAMW, 0.010, agree=False))
    r.rows.append(_row(pb.DDP_VARIANT_NAIVE, 0, pb.DDP_OPTIMIZER_ADAMW, 0.012))
    r.rows.append(_row(pb.DDP_VARIANT_BUCKETED, 25, pb.DDP_OPTIMIZER_SHARDED_ADAMW, 0.011,
                       state=4000))
    r.rows.append(_row(pb.DDP_VARIANT_FLAT, 0, pb.DDP_OPTIMIZER_SHARDED_ADAMW, 0.013,
                       agree=False, state=4000))
    return r


def test_labels_as_benchctl_prints_them() -> None:
    assert ddp_run_label(0, 0, pb.DDP_OPTIMIZER_ADAMW) == "compute only"
    assert ddp_run_label(pb.DDP_VARIANT_NAIVE, 0, pb.DDP_OPTIMIZER_ADAMW) == "naive"
    assert ddp_run_label(pb.DDP_VARIANT_BUCKETED, 2.5, pb.DDP_OPTIMIZER_SHARDED_ADAMW) == \
        "bucketed 2.5 MB + sharded_adamw"
    assert ddp_run_label(pb.DDP_VARIANT_OVERLAP, 0, pb.DDP_OPTIMIZER_ADAMW,
                         pb.DDP_GRADIENT_COMPRESSION_BF16) == "overlap + bf16 gradients"
    assert ddp_run_label(pb.DDP_VARIANT_OVERLAP, 0, pb.DDP_OPTIMIZER_ADAMW,
                         pb.DDP_GRADIENT_COMPRESSION_NONE) == "overlap"


def test_gradient_compressions_reach_the_spec_and_bad_names_are_refused() -> None:
    d = A.ddp_spec(dict(devices="cpu:0,cpu:1", gradient_compressions="none,BF16")).ddp
    assert list(d.gradient_compressions) == [pb.DDP_GRADIENT_COMPRESSION_NONE,
                                             pb.DDP_GRADIENT_COMPRESSION_BF16]
    assert not A.ddp_spec(dict(devices="cpu:0,cpu:1")).ddp.gradient_compressions
    with pytest.raises(benchd.ArgumentError, match="gradient_compressions"):
        A.ddp_spec(dict(devices="cpu:0,cpu:1", gradient_compressions="fp16"))


def test_result_frames_from_a_hand_made_result() -> None:
    r = benchd.DdpResult(_result(), "j9")
    df = r.to_pandas()
    assert df["run"].tolist() == ["compute only", "naive", "bucketed 25 MB + sharded_adamw",
                                  "flat + sharded_adamw"]
    assert df["variant"].tolist() == ["", "naive", "bucketed", "flat"]
    assert df["step_ms"].tolist() == pytest.approx([10.0, 12.0, 11.0, 13.0])
    assert df["exposed_comm_ms"].tolist() == pytest.approx([0.0, 2.0, 1.0, 3.0])
    assert df["buckets"].tolist() == [0, 0, 1, 0]
    sharded = df[df["optimizer"] == "sharded_adamw"]
    assert (sharded["optimizer_state_bytes"] < sharded["unsharded_optimizer_state_bytes"]).all()
    # compute only's ranks train apart: not compared (None), never "diverged"
    assert df["ranks_agree"].tolist() == [None, True, True, False]
    assert (df["job_id"] == "j9").all() and (df["world_size"] == 2).all()
    assert r.diverged == ["flat + sharded_adamw"] and not r.ranks_agree
    assert r.compute_only_ms == pytest.approx(10.0)
    ranks = r.ranks()
    assert len(ranks) == 8 and ranks["device"].tolist()[:2] == ["cpu:0", "cpu:1"]
    assert ranks["comm_host_ms"].tolist()[:4] == pytest.approx([0.0, 0.0, 2.0, 2.0])
    steps = r.steps()
    assert len(steps) == 8 and steps["step_ms"].tolist()[:2] == pytest.approx([10.0, 11.0])
    html = r._repr_html_()
    assert "DIVERGED after flat + sharded_adamw" in html and "<table" in html
    fixed = _result()
    fixed.rows[2].ranks_agree = True
    assert benchd.DdpResult(fixed).ranks_agree


def test_timelines_predictions_and_the_plot_from_a_hand_made_result() -> None:
    proto = _result()
    naive = proto.rows[0]
    naive.predicted_exposed_comm_seconds = 0.0015
    for k in naive.ranks:  # computing 0..8 ms, communicating 6..10 ms
        k.timeline.trace_artifact = f"ddp-run1-rank{k.rank}.trace.json"
        k.timeline.comm_seconds, k.timeline.comm_overlapped_seconds = 0.004, 0.002
        k.timeline.spans.add(lane=pb.DDP_LANE_COMPUTE, start_seconds=0, end_seconds=0.008)
        k.timeline.spans.add(lane=pb.DDP_LANE_COMMUNICATION, start_seconds=0.006,
                             end_seconds=0.010)
    proto.overhead_model.per_call_seconds = 2e-5
    r = benchd.DdpResult(proto, "j9")
    df = r.to_pandas()
    assert df["predicted_exposed_ms"].tolist()[1] == pytest.approx(1.5)
    assert math.isnan(df["predicted_exposed_ms"].tolist()[0])  # compute only: none
    assert df["comm_hidden_fraction"].tolist()[1] == pytest.approx(0.5)
    assert math.isnan(df["comm_hidden_fraction"].tolist()[2])  # no timeline
    assert r.overhead_model.per_call_seconds == pytest.approx(2e-5)
    t = r.timeline()
    assert t["run"].tolist() == ["naive"] * 4 and t["rank"].tolist() == [0, 0, 1, 1]
    assert t["lane"].tolist() == ["compute", "communication"] * 2
    assert t["end_ms"].tolist() == pytest.approx([8.0, 10.0, 8.0, 10.0])
    assert t["trace"].tolist()[2] == "ddp-run1-rank1.trace.json"
    pytest.importorskip("matplotlib")
    from benchd import plots
    fig = plots.ddp_timeline(r)
    ax = fig.axes[0]
    assert [x.get_text() for x in ax.get_yticklabels()] == ["naive / rank 0", "naive / rank 1"]
    with pytest.raises(benchd.ArgumentError, match="runs: \\['flat'\\] not among"):
        plots.ddp_timeline(r, runs=["flat"])
    with pytest.raises(benchd.BenchdError, match="traces=False"):
        plots.ddp_timeline(benchd.DdpResult(_result()))


def test_progress_counts_the_runs_of_a_resolved_spec() -> None:
    spec = pb.JobSpec()
    spec.ddp.variants.extend([pb.DDP_VARIANT_NAIVE, pb.DDP_VARIANT_BUCKETED])
    spec.ddp.bucket_mb.extend([1, 10, 100])
    spec.ddp.optimizers.extend([pb.DDP_OPTIMIZER_ADAMW, pb.DDP_OPTIMIZER_SHARDED_ADAMW])
    assert C.ddp_runs(spec) == 1 + (1 + 3) * 2
    assert C.ddp_runs(pb.JobSpec(benchmark=pb.BenchmarkSpec())) is None


def test_a_ddp_row_event() -> None:
    row = _row(pb.DDP_VARIANT_NAIVE, 0, pb.DDP_OPTIMIZER_ADAMW, 0.012)
    e = C.Event(pb.JobEvent(job_id="j9", ddp_row=row))
    assert e.kind == "ddp_row" and e.ddp_row == row and not e.terminal
    assert C.Event(pb.JobEvent(job_id="j9", log="x")).ddp_row is None


# ------------------------------------------------------------------ a real job

def test_ddp_on_two_cpu_workers_over_gloo(client: benchd.Client) -> None:
    job = client.ddp(devices=["cpu:0", "cpu:1"], backend="gloo", global_batch=4,
                     variants=["naive", "bucketed"], bucket_mb=[0.01],
                     optimizers=["adamw", "sharded_adamw"], **SMALL)
    assert job.kind == "ddp"
    events = list(job.events())
    assert events[-1].kind == "result", (events[-1].kind, job.proto.error_message)
    r = job.result
    assert isinstance(r, benchd.DdpResult)
    assert r.world_size == 2 and r.global_batch_size == 4 and r.spec.step.batch_size == 2
    assert r.spec.step.mode == pb.BENCHMARK_MODE_TRAIN_STEP  # written out
    assert r.group.transient and list(r.group.devices) == ["cpu:0", "cpu:1"]
    assert r.timer == "host_steady_clock" and r.parameter_count > 0
    df = r.to_pandas()
    assert df["run"].tolist() == ["compute only", "naive", "naive + sharded_adamw",
                                  "bucketed 0.01 MB", "bucketed 0.01 MB + sharded_adamw"]
    # every run's rows arrived as events, in run order, before the result
    rows = [e.ddp_row for e in events if e.ddp_row is not None]
    assert [ddp_run_label(x.variant, x.bucket_mb, x.optimizer) for x in rows] == df["run"].tolist()
    assert r.ranks_agree, r.diverged
    synced = df[df["variant"] != ""]
    assert (synced["calls_per_step"] > 0).all() and (synced["bytes_per_step"] > 0).all()
    assert (df["step_ms"] > 0).all() and df["loss"].map(math.isfinite).all()
    state = 8 * r.parameter_count  # AdamW's m and v in fp32
    adamw = df[df["optimizer"] == "adamw"]
    sharded = df[df["optimizer"] == "sharded_adamw"]
    assert (adamw["optimizer_state_bytes"] == state).all()
    assert (sharded["unsharded_optimizer_state_bytes"] == state).all()
    assert (sharded["optimizer_state_bytes"] < state).all()
    assert (df[df["variant"] == "bucketed"]["buckets"] >= 1).all()
    assert len(r.ranks()) == 2 * len(df) and set(r.ranks()["device"]) == {"cpu:0", "cpu:1"}
    assert len(r.steps()) == 2 * len(df)  # 2 measured steps per run
    # A profiled step per run and rank: the Gloo calls in every synchronised run.
    t = r.timeline()
    assert set(t["run"]) == set(df["run"]) and set(t["rank"]) == {0, 1}
    comm = set(t[t["lane"] == "communication"]["run"])
    assert comm == set(synced["run"]), comm
    assert (df[df["variant"] != ""]["comm_hidden_fraction"].between(0, 1)).all()
    m = r.overhead_model
    assert not m.unavailable and m.bandwidth_bytes_per_second > 0, m
    assert df[df["optimizer"] == "adamw"].iloc[1:]["predicted_exposed_ms"].notna().all()
    assert df[df["optimizer"] == "sharded_adamw"]["predicted_exposed_ms"].isna().all()


def test_ddp_refusals_from_the_daemon_name_the_field(client: benchd.Client) -> None:
    with pytest.raises(benchd.InvalidArgument, match="ddp.global_batch_size: 3 does not split"):
        client.ddp(devices=["cpu:0", "cpu:1"], global_batch=3, **SMALL)
    with pytest.raises(benchd.InvalidArgument, match="ddp.bucket_mb.1.: 10 MB is listed twice"):
        client.ddp(devices=["cpu:0", "cpu:1"], bucket_mb=[10, 10], **SMALL)
