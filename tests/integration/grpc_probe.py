"""A well-behaved client for tests/integration/test_http2_abuse.py, in a process
of its own so that the attacker's Python (same interpreter, same GIL) does not
slow it: GetJob over one TLS channel every INTERVAL seconds until a line comes
on stdin, then one JSON line: every call's latency in ms and every error.

    python3 grpc_probe.py ADDRESS CA_PEM JOB_ID STUB_DIR

It prints "ready" once its channel is connected and a first call answered."""
import json
import os
import sys
import threading
import time

INTERVAL = 0.01   # s between calls: a busy client, not an attacker
DEADLINE = 5.0    # s per call: a call over it is an error, not a latency


def main(address, ca, job_id, stub_folder):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../bench"))
    import grpc
    from benchd_harness import stubs
    pb, pb_grpc = stubs(stub_folder)
    with open(ca, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    channel = grpc.secure_channel(address, creds, options=[("grpc.ssl_target_name_override",
                                                            "localhost")])
    stub = pb_grpc.BenchStub(channel)
    request = pb.GetJobRequest(job_id=job_id)
    stub.GetJob(request, timeout=30)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    latencies, errors = [], []
    while not stop.is_set():
        t = time.perf_counter()
        try:
            job = stub.GetJob(request, timeout=DEADLINE)
            assert job.id == job_id, job
            latencies.append((time.perf_counter() - t) * 1000)
        except grpc.RpcError as e:
            errors.append(f"{e.code().name}: {e.details()}")
        time.sleep(INTERVAL)
    channel.close()
    print(json.dumps({"latencies_ms": latencies, "errors": errors}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
