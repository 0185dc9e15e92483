"""One srun task per node (tests/cluster/test_slurm_cluster.py): says where it
runs and proves it reaches every other node of the job by name, over TCP.

Each task listens on PORT (every node has its own network namespace, so one
port serves all), connects to every other node by its Slurm node name (resolved
through that node's /etc/hosts), sends its own name and reads the peer's back.
It prints one line, "PROBE {json}": its Slurm ids, node name, hostname, the
address its name resolves to, the source address of its connections, whom it
reached (name -> address it resolved) and who reached it (name -> the peer
address its listener saw). Exits 1 when it reached or heard from fewer than all.
"""
import json
import os
import socket
import sys
import threading
import time

PORT = 17531
DEADLINE_S = 20.0


def main() -> int:
    me = os.environ["SLURMD_NODENAME"]
    nodes = os.environ["PROBE_NODES"].split(",")
    others = [n for n in nodes if n != me]
    heard: dict[str, str] = {}
    done = threading.Event()
    server = socket.create_server(("0.0.0.0", PORT), reuse_port=False)
    server.settimeout(0.2)

    def serve() -> None:
        while not done.is_set():
            try:
                conn, (peer_ip, _) = server.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(5)
                name = conn.makefile("r").readline().strip()
                conn.sendall(f"{me}\n".encode())
                heard[name] = peer_ip

    listener = threading.Thread(target=serve, daemon=True)
    listener.start()
    reached: dict[str, str] = {}
    source = None
    deadline = time.monotonic() + DEADLINE_S
    for other in others:
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((other, PORT), timeout=2) as conn:
                    source = conn.getsockname()[0]
                    conn.sendall(f"{me}\n".encode())
                    answer = conn.makefile("r").readline().strip()
                    if answer == other:
                        reached[other] = conn.getpeername()[0]
                        break
            except OSError:
                time.sleep(0.1)   # its listener is not up yet
    while len(heard) < len(others) and time.monotonic() < deadline:
        time.sleep(0.05)
    done.set()
    listener.join()
    server.close()
    report = {
        "nodeid": int(os.environ["SLURM_NODEID"]),
        "procid": int(os.environ["SLURM_PROCID"]),
        "nnodes": int(os.environ["SLURM_NNODES"]),
        "nodename": me,
        "hostname": socket.gethostname(),
        "ip": socket.gethostbyname(me),
        "source_ip": source,
        "reached": reached,
        "heard": dict(sorted(heard.items())),
    }
    print("PROBE " + json.dumps(report, sort_keys=True), flush=True)
    return 0 if len(reached) == len(others) and len(heard) == len(others) else 1


if __name__ == "__main__":
    sys.exit(main())
