"""The attention request through a real CPU daemon: a cell's result as a
typed object and a one-row DataFrame, and refusals naming the field."""
from __future__ import annotations

import math

import pytest

import benchd


def test_attention_cell_is_one_row_with_the_write_ups_columns(client: benchd.Client) -> None:
    job = client.attention(device="cpu:0", batch_size=2, seq_len=64, head_dim=16, causal=True,
                           impl="math", warmup=1, passes=3)
    job.wait(timeout=120, progress=False)
    assert job.state == benchd.JobState.SUCCEEDED, job.proto.error_message
    r = job.result
    assert isinstance(r, benchd.AttentionResult)
    assert r.spec.batch_size == 2 and not r.spec.HasField("num_heads")
    assert r.forward_ms > 0 and r.backward_ms > 0
    assert not r.memory_measured  # a CPU has no allocator to ask
    df = r.to_pandas()
    assert len(df) == 1
    row = df.iloc[0]
    assert (row.impl, row.precision, row.causal, row.seq_len, row.head_dim) == (
        "sdpa_math", "fp32", True, 64, 16)
    assert row.score_matrix_bytes == 2 * 64 * 64 * 4
    assert math.isnan(row.saved_bytes) and math.isnan(row.peak_bytes)
    assert row.forward_tflops == pytest.approx(4 * 2 * 64 * 64 * 16 / (row.forward_ms / 1e3) / 1e12)
    passes = r.passes()
    assert list(passes.warmup) == [True, False, False, False]
    assert (passes.forward_ms > 0).all()


def test_attention_refusals_name_the_field(client: benchd.Client) -> None:
    with pytest.raises(benchd.InvalidArgument,
                       match="attention.implementation: the efficient SDPA backend is a CUDA"):
        client.attention(device="cpu:0", impl="efficient")
    with pytest.raises(benchd.InvalidArgument, match="attention.memory_cap_bytes"):
        client.attention(device="cpu:0", memory_cap="1GiB")
    with pytest.raises(benchd.InvalidArgument, match="attention.seq_len: expected 1..1048576"):
        client.attention(device="cpu:0", seq_len=0)
