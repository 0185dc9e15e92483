"""bench/collective_compare.py and bench/tcp_throughput.py on the CPU: the
spawned reference beside benchd, one torch.distributed rank per process (as
scripts/gpu-cross-node.sh starts one per node) compared with a finished Job,
and raw TCP between two endpoints."""
import json
import os
import socket
import subprocess
import sys

from conftest import BIN, SRC, cpu_daemon

COMPARE = os.path.join(SRC, "bench", "collective_compare.py")
TCP = os.path.join(SRC, "bench", "tcp_throughput.py")
SWEEP = ["--devices", "cpu:0,cpu:1", "--backend", "gloo", "--op", "all_reduce", "--min", "1KiB",
         "--max", "64KiB", "--factor", "4", "--warmup", "1", "--iters", "3", "--in-place"]
SIZES = [1024, 4096, 16384, 65536]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, **kw):
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, timeout=300, **kw)


def table_sizes(stdout):
    return [int(line.split()[0]) for line in stdout.splitlines() if line.strip()[:1].isdigit()]


def test_benchd_and_torch_side_by_side_and_one_rank_per_process(tmp_path):
    with cpu_daemon(["cpu:0", "cpu:1"], "benchd-cc-") as d:
        # Both sides in one command: benchd through benchctl, torch spawned.
        out = tmp_path / "both.json"
        r = run([COMPARE, "--benchctl", os.path.join(BIN, "benchctl"), "--address", d.address,
                 *SWEEP, "--json", str(out)])
        assert r.returncode == 0, (r.stdout, r.stderr, d.log())
        assert table_sizes(r.stdout) == SIZES, r.stdout
        rows = json.loads(out.read_text())["rows"]
        assert [row["size_bytes"] for row in rows] == SIZES
        for row in rows:
            assert row["benchd"]["median_s"] > 0 and row["torch"]["median_s"] > 0, row
            assert row["benchd"]["wrong"] == 0 and row["busbw_ratio"] > 0, row

        # One rank per process, the store on rank 0's address; rank 0 writes the rows.
        rows_file = tmp_path / "torch-rows.json"
        store = f"127.0.0.1:{free_port()}"
        ranks = [subprocess.Popen([sys.executable, COMPARE, *SWEEP, "--rank", str(rank),
                                   "--store", store, "--torch-out", str(rows_file)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank in (0, 1)]
        for p in ranks:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
        torch_rows = json.loads(rows_file.read_text())["rows"]
        assert [row["size_bytes"] for row in torch_rows] == SIZES
        assert all(row["median_s"] > 0 and row["busbw_gbps"] > 0 for row in torch_rows), torch_rows

        # Those rows beside a Job benchd ran on its own.
        job = subprocess.run(
            [os.path.join(BIN, "benchctl"), "--address", d.address, "submit", "collective",
             "--devices", "cpu:0,cpu:1", "--backend", "gloo", "--op", "all_reduce",
             "--sizes", ",".join(map(str, SIZES)), "--warmup", "1", "--iters", "3", "--watch",
             "--json"], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert job.returncode == 0, job.stderr
        job_file = tmp_path / "job.json"
        job_file.write_text(job.stdout)
        r = run([COMPARE, *SWEEP, "--compare-job", str(job_file), "--torch-rows", str(rows_file)])
        assert r.returncode == 0, r.stderr
        assert table_sizes(r.stdout) == SIZES, r.stdout

    # A Job that did not succeed is named, not compared.
    failed = tmp_path / "failed.json"
    failed.write_text(json.dumps({"id": "7", "state": "JOB_STATE_FAILED",
                                  "errorMessage": "group g1 is broken"}))
    r = run([COMPARE, *SWEEP, "--compare-job", str(failed), "--torch-rows", str(rows_file)])
    assert r.returncode != 0
    assert "job 7 JOB_STATE_FAILED: group g1 is broken" in r.stderr, r.stderr


def test_tcp_throughput_counts_every_byte_of_every_stream():
    address = f"127.0.0.1:{free_port()}"
    receiver = subprocess.Popen([sys.executable, TCP, "--listen", address, "--streams", "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sender = run([TCP, "--connect", address, "--streams", "2", "--bytes", "64MiB"])
    out, err = receiver.communicate(timeout=60)
    assert sender.returncode == 0 and receiver.returncode == 0, (sender.stderr, err)
    result = json.loads(out)
    assert result["streams"] == 2 and result["bytes"] == 2 * (64 << 20), result
    assert result["seconds"] > 0 and result["gbps"] > 0, result
    r = run([TCP, "--streams", "2"])
    assert r.returncode != 0 and "give one of --listen or --connect" in r.stderr
