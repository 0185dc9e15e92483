"""While a process group of this node's workers is resident, nothing of it
listens beyond loopback: the c10d TCPStore on rank 0 and Gloo's transport
bind 127.0.0.1 only (a cross-node group's addresses come from its launcher)."""
import os
import socket
import struct

from conftest import bench_pb2, cpu_daemon

DEVICES = ["cpu:0", "cpu:1"]
LISTEN = "0A"


def socket_inodes(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def decode(hex_addr, family):
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    if family == socket.AF_INET:
        packed = struct.pack("<I", int.from_bytes(raw, "big"))
    else:  # four little-endian 32-bit words
        packed = b"".join(struct.pack("<I", int.from_bytes(raw[i:i + 4], "big"))
                          for i in range(0, 16, 4))
    return socket.inet_ntop(family, packed), int(port, 16)


def listening(pid):
    """(address, port) of every TCP socket the process listens on."""
    mine = socket_inodes(pid)
    out = []
    for path, family in ((f"/proc/{pid}/net/tcp", socket.AF_INET),
                         (f"/proc/{pid}/net/tcp6", socket.AF_INET6)):
        with open(path) as f:
            next(f)
            for line in f:
                cols = line.split()
                if cols[3] == LISTEN and cols[9] in mine:
                    out.append(decode(cols[1], family))
    return out


def is_loopback(address):
    return address in ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def test_a_resident_local_group_listens_on_loopback_only():
    with cpu_daemon(DEVICES, "benchd-listen-") as d:
        info = d.stub.GetNodeInfo(bench_pb2.GetNodeInfoRequest(), timeout=10)
        pids = [dev.worker_pid for dev in info.devices]
        before = {pid: set(listening(pid)) for pid in pids}
        group = d.stub.CreateGroup(bench_pb2.CreateGroupRequest(
            devices=DEVICES, backend=bench_pb2.COLLECTIVE_BACKEND_GLOO), timeout=120)
        assert group.state == bench_pb2.GROUP_STATE_READY, group
        opened = {pid: set(listening(pid)) - before[pid] for pid in pids}
        # Rank 0 serves the group's store: the check is not vacuous.
        assert opened[pids[0]], f"rank 0 ({pids[0]}) listens on nothing new: {opened}"
        for pid, sockets in opened.items():
            for address, port in sockets:
                assert is_loopback(address), \
                    f"worker {pid} listens on {address}:{port} with group {group.id} resident"
        # Before the group, the workers listened on no TCP port at all.
        assert all(not s for s in before.values()), before
        d.stub.DestroyGroup(bench_pb2.DestroyGroupRequest(group=group.id), timeout=60)
