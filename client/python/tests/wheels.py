"""The package installs without a compiler on CPython 3.11-3.14 (ctest python_client.wheels).

    python3 tests/wheels.py [3.11 3.13 ...]      # from client/python or anywhere

For each Python version V, with nothing but this interpreter (no Python V is needed):

1. V's build requirements: pyproject.toml's [build-system] requires with their
   environment markers evaluated for V (pip does not evaluate a requirement's
   markers for --python-version: it would use this interpreter's), plus what
   setuptools' backend asks for on top (get_requires_for_build_wheel).
2. The runtime requirements as the package declares them on V: its metadata
   made by setuptools' backend (prepare_metadata_for_build_wheel, which runs
   setup.py) in a venv holding V's build requirements for this interpreter
   (each grpcio-tools branch has wheels for 3.11 too). setup.py reads the
   grpcio and protobuf floors from the stubs that grpcio-tools generates, and
   the generated code does not depend on the interpreter that runs protoc.
3. `pip download --only-binary=:all: --python-version V --implementation cp
   --abi cpVV --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64
   ... --platform manylinux_2_28_x86_64` (glibc 2.28 and newer) of (1), of (2), and of the
   declared grpcio and protobuf floors exactly (what a resolver that picks the
   lowest versions would install): each must succeed, so every requirement,
   with what it pulls in, has a wheel for V. (pip evaluates the markers of the
   dependencies it pulls in for this interpreter; the versions it picks must
   still have V's wheels.)
4. The floors: where V builds with grpcio-tools 1.60, exactly setup.py's LOWEST
   (what ctest python_client.lowest runs on); on every branch, the stubs it
   generates are imported on exactly the declared grpcio and protobuf, so the
   generated code accepts the oldest runtimes the package declares.

Runs on Python 3.11+ (tomllib). Needs PyPI, as scripts/setup.sh does (or the index pip is configured for).
Everything it fetches is kept in $TMPDIR/benchd-wheels-check (pip's cache,
the downloaded wheels, a venv per grpcio-tools branch, the metadata each made;
about 400 MB): the first run takes about a minute, one after it is mostly
pip resolving (12 calls, about 30 s of CPU in all; 35 s of wall time on a
2-core machine shared with other builds). BENCHD_OFFLINE=1 skips it (exit 77,
which ctest reports as skipped).
"""
from __future__ import annotations

import ast
import concurrent.futures
import email.parser
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib

from packaging.markers import default_environment
from packaging.requirements import Requirement

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
VERSIONS = ["3.11", "3.12", "3.13", "3.14"]
# Linux x86_64 with glibc 2.28 or newer (RHEL 8, Debian 10, Ubuntu 20.04 and
# later; Debian 13 has 2.41): manylinux2014 (glibc 2.17, which pip widens to
# manylinux2010 and manylinux1) and the manylinux_2_x tags up to 2.28, which pip
# does not infer from one another (pandas has no manylinux2014 wheel for 3.14).
PLATFORMS = ["manylinux2014_x86_64"] + [f"manylinux_2_{minor}_x86_64" for minor in range(17, 29)]
CACHE = os.path.join(tempfile.gettempdir(), "benchd-wheels-check")
SKIP = 77
VENV_DAYS = 1

# Run in a branch's venv, in the package's folder: what setuptools' backend
# asks for and the metadata it makes (setup.py runs, generating the stubs).
METADATA_SCRIPT = textwrap.dedent("""\
    import json, os, sys, tempfile
    import setuptools.build_meta as backend
    target = sys.argv[1]  # before the backend rewrites sys.argv for setup.py
    extra = backend.get_requires_for_build_wheel()
    out = tempfile.mkdtemp()
    name = backend.prepare_metadata_for_build_wheel(out)
    with open(os.path.join(out, name, "METADATA")) as f:
        metadata = f.read()
    with open(target, "w") as f:
        json.dump({"extra": extra, "metadata": metadata}, f)
""")
# Run in a branch's venv on the declared floors: the stubs generated there import.
IMPORT_SCRIPT = textwrap.dedent("""\
    import importlib.util, sys, tempfile
    spec = importlib.util.spec_from_file_location("gen", sys.argv[1])
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    out = tempfile.mkdtemp()
    gen.generate(out, typed=False)
    sys.path.insert(0, out)
    import grpc, google.protobuf
    import benchd.v1.bench_pb2, benchd.v1.bench_pb2_grpc
    print(grpc.__version__, google.protobuf.__version__)
""")


class Failed(Exception):
    pass


def environment(version: str) -> dict[str, str]:
    """The marker environment of CPython `version` on Linux x86_64."""
    env = dict(default_environment())
    env.update(python_version=version, python_full_version=f"{version}.0",
               implementation_name="cpython", platform_python_implementation="CPython",
               sys_platform="linux", platform_system="Linux", platform_machine="x86_64",
               os_name="posix")
    return env


def select(requirements: list[str], version: str) -> list[str]:
    """The requirements that apply on `version`, without their markers."""
    env = environment(version)
    out = []
    for text in requirements:
        r = Requirement(text)
        if r.marker is None or r.marker.evaluate(env):
            r.marker = None
            out.append(str(r))
    return out


def build_requirements(version: str) -> list[str]:
    with open(os.path.join(PKG, "pyproject.toml"), "rb") as f:
        return select(tomllib.load(f)["build-system"]["requires"], version)


def lowest() -> dict[str, str]:
    """setup.py's LOWEST, read without running setup.py."""
    with open(os.path.join(PKG, "setup.py")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "LOWEST" for t in node.targets):
            return {str(k): str(v) for k, v in ast.literal_eval(node.value).items()}
    raise Failed(f"no LOWEST in {PKG}/setup.py")


def run(*cmd: str, **kw: object) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if r.returncode != 0:
        raise Failed(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return str(r.stdout)


def pip(*args: str) -> str:
    return run(sys.executable, "-m", "pip", "--disable-pip-version-check",
               "--cache-dir", os.path.join(CACHE, "pip"), *args)


class Branch:
    """A venv for this interpreter with one set of build requirements: the
    package's metadata made there, then its stubs imported on the floors."""

    def __init__(self, requirements: list[str]) -> None:
        self.requirements = requirements
        key = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:16]
        self.venv = os.path.join(CACHE, "venv-" + key)
        self.python = os.path.join(self.venv, "bin", "python")

    def prepare(self) -> None:
        """Makes the venv, or keeps the one made within a day (then makes it
        again, to follow new releases within the pins)."""
        ready = os.path.join(self.venv, "requirements.txt")
        try:
            with open(ready) as f:
                if (f.read().splitlines() == self.requirements
                        and time.time() - os.path.getmtime(ready) < VENV_DAYS * 86400):
                    return
        except OSError:
            pass
        shutil.rmtree(self.venv, ignore_errors=True)
        run(sys.executable, "-m", "venv", "--without-pip", self.venv)
        pip("--python", self.python, "install", "-q", *self.requirements)
        with open(ready, "w") as f:
            f.write("\n".join(self.requirements) + "\n")

    def metadata(self) -> tuple[list[str], list[str]]:
        """(what the backend adds to the build requirements, Requires-Dist),
        from a copy of the package (the backend writes beside setup.py); kept
        in the venv for the same venv, build files and .proto files."""
        digest = hashlib.sha256()
        for path in [os.path.join(self.venv, "requirements.txt")] + [
                os.path.join(PKG, n) for n in ("setup.py", "gen_proto.py", "pyproject.toml")] + sorted(
                os.path.join(d, n) for d, _, names in os.walk(proto_root()) for n in names):
            with open(path, "rb") as f:
                digest.update(path.encode() + b"\0" + f.read())
        digest.update(str(os.path.getmtime(os.path.join(self.venv, "requirements.txt"))).encode())
        kept = os.path.join(self.venv, f"metadata-{digest.hexdigest()[:16]}.json")
        if os.path.exists(kept):
            with open(kept) as f:
                answer = json.load(f)
            return list(answer["extra"]), list(answer["requires"])
        answer = self._metadata()
        with open(kept + ".tmp", "w") as f:
            json.dump({"extra": answer[0], "requires": answer[1]}, f)
        os.replace(kept + ".tmp", kept)
        return answer

    def _metadata(self) -> tuple[list[str], list[str]]:
        with tempfile.TemporaryDirectory(prefix="benchd-wheels-") as tmp:
            copy = os.path.join(tmp, "pkg")
            shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns(
                "build", "dist", "*.egg-info", ".*", "__pycache__", "tests", "v1"))
            out = os.path.join(tmp, "metadata.json")
            run(self.python, "-c", METADATA_SCRIPT, out, cwd=copy,
                env={**os.environ, "BENCHD_PROTO_DIR": proto_root()})
            with open(out) as f:
                answer = json.load(f)
        message = email.parser.Parser().parsestr(answer["metadata"])
        return list(answer["extra"]), list(message.get_all("Requires-Dist") or [])

    def import_on(self, floors: dict[str, str]) -> str:
        installed = run(self.python, "-c", "import grpc, google.protobuf as p; "
                        "print(grpc.__version__, p.__version__)").split()
        if installed != [floors["grpcio"], floors["protobuf"]]:
            pip("--python", self.python, "install", "-q",
                *(f"{name}=={v}" for name, v in sorted(floors.items())))
        # -I and a folder of its own: no benchd package but the generated one
        # (a checkout's benchd/ in the working directory would win).
        with tempfile.TemporaryDirectory(prefix="benchd-wheels-") as tmp:
            return run(self.python, "-I", "-c", IMPORT_SCRIPT, os.path.join(PKG, "gen_proto.py"),
                       cwd=tmp, env={**os.environ, "BENCHD_PROTO_DIR": proto_root()}).strip()


def proto_root() -> str:
    """The .proto files, as gen_proto.py finds them from the package's folder."""
    for candidate in (os.environ.get("BENCHD_PROTO_DIR"), os.path.join(PKG, "..", "..", "proto"),
                      os.path.join(PKG, "proto")):
        if candidate and os.path.isfile(os.path.join(candidate, "benchd", "v1", "bench.proto")):
            return os.path.abspath(candidate)
    raise Failed("no proto/benchd/v1/bench.proto beside the package")


def floors_of(requirements: list[str]) -> dict[str, str]:
    out = {}
    for text in requirements:
        r = Requirement(text)
        if r.name in ("grpcio", "protobuf"):
            (spec,) = [s for s in r.specifier if s.operator == ">="]
            out[r.name] = spec.version
    return out


def download(version: str, requirements: list[str], what: str) -> None:
    # A folder per version and list: the downloads run side by side.
    dest = os.path.join(CACHE, "wheels", version, what.split()[0])
    abi = "cp" + version.replace(".", "")
    try:
        pip("download", "-q", "--only-binary=:all:", "--python-version", version,
            "--implementation", "cp", "--abi", abi,
            *(f"--platform={p}" for p in PLATFORMS), "-d", dest,
            *requirements)
    except Failed as e:
        raise Failed(f"Python {version}: no wheel for some of the {what} {requirements}:\n{e}")
    sdists = [f for f in os.listdir(dest) if not f.endswith(".whl")]
    if sdists:
        raise Failed(f"Python {version}: not wheels: {sdists}")


def check(versions: list[str]) -> list[str]:
    """Checks each version; returns the lines of the report."""
    build = {v: build_requirements(v) for v in versions}
    branches = {tuple(reqs): Branch(reqs) for reqs in build.values()}
    declared: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}

    def prepare(key: tuple[str, ...]) -> None:
        branches[key].prepare()
        declared[key] = branches[key].metadata()

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for f in [pool.submit(prepare, key) for key in branches]:
            f.result()
        report, jobs = [], []
        for v in versions:
            extra, requires = declared[tuple(build[v])]
            runtime = select([r for r in requires if "extra ==" not in r], v)
            floors = floors_of(runtime)
            if set(floors) != {"grpcio", "protobuf"}:
                raise Failed(f"Python {v}: the package declares no grpcio/protobuf floor: {runtime}")
            if any(Requirement(r).name == "grpcio-tools" and Requirement(r).specifier.contains("1.60.0")
                   for r in build[v]) and floors != lowest():
                raise Failed(f"Python {v} builds with grpcio-tools 1.60 but declares {floors}, "
                             f"not setup.py's LOWEST {lowest()}")
            jobs += [pool.submit(download, v, build[v] + select(extra, v), "build requirements"),
                     pool.submit(download, v, runtime, "runtime requirements"),
                     pool.submit(download, v, [f"{n}=={x}" for n, x in sorted(floors.items())],
                                 "declared floors")]
            report.append(f"Python {v}: build {build[v] + select(extra, v)}; runtime {runtime}")
        for f in jobs:
            f.result()
    # The generated code of each branch on exactly the floors it declares (after
    # the downloads: this changes the branch venv's grpcio and protobuf).
    for key, branch in branches.items():
        floors = floors_of([r for r in declared[key][1] if "extra ==" not in r])
        used = [v for v in versions if tuple(build[v]) == key]
        report.append(f"stubs of {[r for r in key if r.startswith('grpcio-tools')]} (Python "
                      f"{', '.join(used)}) import on grpcio, protobuf {branch.import_on(floors)}")
    return report


def main(argv: list[str]) -> int:
    if os.environ.get("BENCHD_OFFLINE") == "1":
        print("wheels.py: BENCHD_OFFLINE=1: skipped (it needs PyPI)")
        return SKIP
    versions = argv or VERSIONS
    os.makedirs(CACHE, exist_ok=True)
    try:
        with open(os.path.join(CACHE, "lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one run at a time changes the cache
            for line in check(versions):
                print(line)
    except Failed as e:
        print(f"wheels.py: FAILED: {e}", file=sys.stderr)
        print("(it needs PyPI, or the index pip is configured for; BENCHD_OFFLINE=1 skips it)",
              file=sys.stderr)
        return 1
    print(f"wheels.py: every build and runtime requirement has a wheel for CPython "
          f"{', '.join(versions)} on Linux x86_64, glibc 2.28+; cache {CACHE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
