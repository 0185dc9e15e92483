"""What other local users can reach: the modes of everything under the data
dir whatever the umask, the workers' sockets when the data dir's path is too
long for a Unix socket, and artifact folders that are symbolic links."""
import glob
import json
import os
import shutil
import stat
import subprocess
import tempfile

import grpc
import pytest

from conftest import Daemon, bench_pb2, wait_for_state

TINY = ["--preset", "tiny", "--batch-size", "2", "--context-length", "16"]


def run_job(daemon, kind="benchmark", *extra):
    r = daemon.benchctl("submit", kind, *TINY, "--steps", "1", "--warmup-steps", "0", *extra,
                        "--json", check=0)
    job_id = json.loads(r.stdout)["id"]
    job = wait_for_state(daemon.stub, job_id, [bench_pb2.JOB_STATE_SUCCEEDED,
                                               bench_pb2.JOB_STATE_FAILED])
    assert job.state == bench_pb2.JOB_STATE_SUCCEEDED, (job.error_message, daemon.log())
    return job_id


@pytest.fixture
def scratch():
    d = tempfile.mkdtemp(prefix="benchd-sec-")
    yield d
    subprocess.run(["rm", "-rf", d])


def modes_open_to_others(root):
    """Every path under root (root included) with a group or other bit set."""
    bad = []
    for path in [root] + [os.path.join(d, n) for d, dirs, files in os.walk(root)
                          for n in dirs + files]:
        m = os.lstat(path).st_mode
        if stat.S_IMODE(m) & 0o077:
            bad.append(f"{path}: {oct(stat.S_IMODE(m))}")
    return bad


def test_umask_0_leaves_nothing_open_to_others(scratch):
    data = os.path.join(scratch, "data")  # made by the daemon
    d = Daemon(data, preexec_fn=lambda: os.umask(0), log_path=os.path.join(scratch, "benchd.log"))
    d.start()
    try:
        d.wait_worker_up()
        job_id = run_job(d, "profile", "--profile-steps", "1")
        assert os.listdir(os.path.join(data, "artifacts", job_id))  # the worker wrote its trace
        socks = glob.glob(os.path.join(data, "run", "*.sock"))
        assert socks and all(stat.S_ISSOCK(os.lstat(s).st_mode) for s in socks)
        for sub in ["logs", "run", "artifacts"]:
            assert stat.S_IMODE(os.lstat(os.path.join(data, sub)).st_mode) == 0o700
        assert modes_open_to_others(data) == []
    finally:
        d.stop()
    assert modes_open_to_others(data) == []


def run_dirs_of(pid):
    bases = {"/tmp", f"/run/user/{os.getuid()}"}
    if os.environ.get("XDG_RUNTIME_DIR"):
        bases.add(os.environ["XDG_RUNTIME_DIR"])
    return [p for b in bases for p in glob.glob(os.path.join(b, f"benchd-run-{os.getuid()}-{pid}*"))]


@pytest.mark.parametrize("with_xdg", [True, False])
def test_long_data_dir_sockets_go_to_a_new_private_dir(scratch, with_xdg):
    data = os.path.join(scratch, "d" * 60, "e" * 60)
    assert len(data) > 108
    target = os.path.join(scratch, "theirs")
    os.mkdir(target)
    os.chmod(target, 0o777)

    def plant():  # in the daemon's process, before exec: the old, predictable path
        os.symlink(target, f"/tmp/benchd-run-{os.getuid()}-{os.getpid()}")

    env = dict(os.environ)
    env.pop("XDG_RUNTIME_DIR", None)
    xdg = None
    if with_xdg:
        xdg = os.path.join(scratch, "xdg")
        os.mkdir(xdg, 0o700)
        env["XDG_RUNTIME_DIR"] = xdg
    d = Daemon(data, preexec_fn=plant, env=env, log_path=os.path.join(scratch, "benchd.log"))
    d.start()
    pid = d.proc.pid
    link = f"/tmp/benchd-run-{os.getuid()}-{pid}"
    try:
        assert os.path.islink(link)
        d.wait_worker_up()
        run_job(d)
        assert os.listdir(target) == []
        made = [p for p in run_dirs_of(pid) + glob.glob(f"{xdg or '/nonexistent'}/benchd-run-*")
                if not os.path.islink(p)]
        assert len(set(made)) == 1, made
        run = made[0]
        if with_xdg:
            assert run.startswith(xdg + "/")
        st = os.lstat(run)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
        assert stat.S_IMODE(st.st_mode) == 0o700
        assert glob.glob(os.path.join(run, "worker-*.sock"))
    finally:
        d.stop()
        if os.path.islink(link):
            os.unlink(link)
    assert os.listdir(target) == []
    left = run_dirs_of(pid) + (glob.glob(os.path.join(xdg, "benchd-run-*")) if xdg else [])
    assert left == []


def test_linked_artifact_folder_or_file_is_not_served(daemon, scratch):
    secret_dir = os.path.join(scratch, "etc")
    os.mkdir(secret_dir)
    with open(os.path.join(secret_dir, "passwd"), "w") as f:
        f.write("root:x:0:0\n")
    daemon.wait_worker_up()
    linked, holed = run_job(daemon), run_job(daemon)
    artifacts = os.path.join(daemon.data_dir, "artifacts")
    shutil.rmtree(os.path.join(artifacts, linked), ignore_errors=True)
    os.symlink(secret_dir, os.path.join(artifacts, linked))
    os.makedirs(os.path.join(artifacts, holed), exist_ok=True)
    os.symlink(os.path.join(secret_dir, "passwd"), os.path.join(artifacts, holed, "passwd"))
    s = daemon.stub

    try:
        listed = s.ListArtifacts(bench_pb2.ListArtifactsRequest(job_id=linked)).artifacts
        assert [a.name for a in listed] == []
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.FAILED_PRECONDITION, e
        assert "not a folder" in e.details()
    with pytest.raises(grpc.RpcError) as e:
        list(s.FetchArtifact(bench_pb2.FetchArtifactRequest(job_id=linked, name="passwd")))
    assert e.value.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)

    assert list(s.ListArtifacts(bench_pb2.ListArtifactsRequest(job_id=holed)).artifacts) == []
    with pytest.raises(grpc.RpcError) as e:
        list(s.FetchArtifact(bench_pb2.FetchArtifactRequest(job_id=holed, name="passwd")))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    r = daemon.benchctl("artifacts", "get", linked, "passwd", "-o", "-")
    assert r.returncode != 0 and "root:x" not in r.stdout
