#!/usr/bin/env python3
"""Raw TCP throughput between two hosts (or two network namespaces): the ceiling
NCCL's socket transport works under (scripts/gpu-cross-node.sh runs it over the
same veth as the cross-node sweep).

  receiver:  python3 bench/tcp_throughput.py --listen HOST:PORT --streams N
  sender:    python3 bench/tcp_throughput.py --connect HOST:PORT --streams N --bytes 4GiB

The sender writes --bytes over each of N parallel TCP connections from one
buffer (no copies of its own beyond the kernel's); the receiver reads into one
buffer per stream and prints one JSON line: streams, bytes, seconds (first byte
to last, the slowest stream), GB/s (10^9 bytes per second, as NCCL's busbw).
"""
import argparse
import json
import socket
import sys
import threading
import time

CHUNK = 4 << 20


def parse_size(text):
    t = text.lower()
    for suffix, scale in (("gib", 1 << 30), ("mib", 1 << 20), ("kib", 1 << 10)):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * scale)
    return int(t)


def address(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def receive(args):
    server = socket.create_server(address(args.listen), backlog=args.streams)
    conns = [server.accept()[0] for _ in range(args.streams)]
    got = [0] * args.streams
    first = [None] * args.streams
    last = [None] * args.streams

    def drain(i, conn):
        buf = memoryview(bytearray(CHUNK))
        while True:
            n = conn.recv_into(buf)
            if n == 0:
                break
            if first[i] is None:
                first[i] = time.perf_counter()
            got[i] += n
        last[i] = time.perf_counter()

    threads = [threading.Thread(target=drain, args=(i, c)) for i, c in enumerate(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(got)
    seconds = max(last) - min(f for f in first if f is not None)
    print(json.dumps({"streams": args.streams, "bytes": total, "seconds": seconds,
                      "gbps": total / seconds / 1e9}))


def send(args):
    each = parse_size(args.bytes)
    conns = []
    for _ in range(args.streams):
        for _attempt in range(100):  # the receiver may still be starting
            try:
                conns.append(socket.create_connection(address(args.connect), timeout=30))
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit(f"tcp_throughput: no receiver at {args.connect}")
    buf = memoryview(bytearray(CHUNK))

    def pump(conn):
        left = each
        while left > 0:
            n = min(left, CHUNK)
            conn.sendall(buf[:n])
            left -= n
        conn.shutdown(socket.SHUT_WR)

    threads = [threading.Thread(target=pump, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", default="")
    p.add_argument("--connect", default="")
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--bytes", default="4GiB", help="per stream (sender)")
    args = p.parse_args()
    if bool(args.listen) == bool(args.connect):
        sys.exit("tcp_throughput: give one of --listen or --connect")
    receive(args) if args.listen else send(args)


if __name__ == "__main__":
    main()
