"""The package on the lowest grpcio and protobuf it declares (setup.py LOWEST:
what it declares where it builds with grpcio-tools 1.60, Python 3.10-3.12; the
higher floors of Python 3.13+ are checked by tests/wheels.py).

    python3 tests/lowest.py setup VENV   # make VENV (scripts/setup.sh does; needs PyPI once)
    python3 tests/lowest.py run VENV     # ctest python_client.lowest (offline)

setup: a venv with exactly grpcio and protobuf of LOWEST, the build's tools
(grpcio-tools of the same minor as grpcio, setuptools with pkg_resources,
which grpcio-tools 1.60 imports) and the test dependencies. Quick when the
venv already has them.

run: installs this checkout's package into VENV when its sources changed
since the last run (no build isolation, no network: the stubs are generated
with the venv's grpcio-tools), checks that grpcio and protobuf are still
exactly LOWEST, then runs the unit tests and the live-daemon smoke test
(test_smoke.py) there.
"""
from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PKG))
TESTS = ["tests/test_args.py", "tests/test_credentials.py", "tests/test_errors.py",
         "tests/test_smoke.py"]


def lowest() -> dict[str, str]:
    """setup.py's LOWEST, read without running setup.py."""
    with open(os.path.join(PKG, "setup.py")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "LOWEST" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return {str(k): str(v) for k, v in value.items()}
    raise SystemExit(f"lowest.py: no LOWEST in {PKG}/setup.py")


def requirements() -> list[str]:
    low = lowest()
    minor = ".".join(low["grpcio"].split(".")[:2])
    return [f"grpcio=={low['grpcio']}", f"protobuf=={low['protobuf']}",
            f"grpcio-tools=={minor}.*", "setuptools>=64,<81", "wheel", "pandas", "tqdm",
            "typing_extensions", "pytest", "matplotlib"]


def _run(*cmd: str, **kw: object) -> None:
    r = subprocess.run(cmd, **kw)  # type: ignore[call-overload]
    if r.returncode != 0:
        raise SystemExit(f"lowest.py: {' '.join(cmd)} failed ({r.returncode})")


def _installed(python: str) -> dict[str, str]:
    out = subprocess.run(
        [python, "-c", "import grpc, google.protobuf as p; print(grpc.__version__, p.__version__)"],
        capture_output=True, text=True)
    if out.returncode != 0:
        return {}
    g, p = out.stdout.split()
    return {"grpcio": g, "protobuf": p}


def setup(venv: str) -> None:
    python = os.path.join(venv, "bin", "python")
    if not os.access(python, os.X_OK):
        _run(sys.executable, "-m", "venv", venv)
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True)
    if _installed(python) == lowest() and check.returncode == 0 and subprocess.run(
            [python, "-c", "import grpc_tools, pandas, tqdm, pytest, matplotlib, pkg_resources, wheel"],
            capture_output=True).returncode == 0:
        return
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements())


def _sources_digest() -> str:
    h = hashlib.sha256()
    files = ["setup.py", "gen_proto.py", "pyproject.toml"]
    for d in ("benchd",):
        for name in sorted(os.listdir(os.path.join(PKG, d))):
            if name.endswith(".py") or name == "py.typed":
                files.append(os.path.join(d, name))
    paths = [os.path.join(PKG, f) for f in files]
    paths.append(os.path.join(REPO, "proto", "benchd", "v1", "bench.proto"))
    for p in paths:
        h.update(p.encode())
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def run(venv: str, pytest_args: list[str]) -> int:
    python = os.path.join(venv, "bin", "python")
    if not os.access(python, os.X_OK):
        print(f"lowest.py: no venv at {venv}; make it with scripts/setup.sh "
              f"(or python3 {__file__} setup {venv})", file=sys.stderr)
        return 1
    want = lowest()
    have = _installed(python)
    if have != want:
        print(f"lowest.py: {venv} has {have}, not the lowest versions {want}; re-run "
              "scripts/setup.sh", file=sys.stderr)
        return 1
    stamp = os.path.join(venv, "benchd-sources.sha256")
    digest = _sources_digest()
    try:
        with open(stamp) as f:
            fresh = f.read().strip() == digest
    except OSError:
        fresh = False
    if not fresh:
        _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
             "--no-build-isolation", "--no-index", "--force-reinstall", PKG)
        with open(stamp, "w") as f:
            f.write(digest + "\n")
    # Installing must not have moved them.
    if _installed(python) != want:
        print(f"lowest.py: installing benchd changed grpcio/protobuf to {_installed(python)}",
              file=sys.stderr)
        return 1
    env = dict(os.environ, BENCHD_EXPECT_GRPCIO=want["grpcio"],
               BENCHD_EXPECT_PROTOBUF=want["protobuf"])
    return subprocess.run([os.path.join(venv, "bin", "pytest"), "-q", "-p", "no:cacheprovider",
                           *TESTS, *pytest_args], cwd=PKG, env=env).returncode


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("setup", "run"):
        print(__doc__, file=sys.stderr)
        return 2
    venv = os.path.abspath(argv[1])
    if argv[0] == "setup":
        setup(venv)
        return 0
    return run(venv, argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
