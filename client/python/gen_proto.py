"""Generates benchd's gRPC stubs from the repository's proto/ (build time only).

The stubs are not committed: setup.py runs this when it builds the package
(``pip install ./client/python``, ``python -m build``), writing the modules of
the proto package ``benchd.v1`` beside the hand-written ``benchd`` package:

    benchd/v1/__init__.py
    benchd/v1/bench_pb2.py       (+ .pyi from mypy-protobuf when it is installed)
    benchd/v1/bench_pb2_grpc.py  (+ .pyi)

Where the .proto files come from, first found:

1. ``$BENCHD_PROTO_DIR`` (a folder holding benchd/v1/bench.proto);
2. ``../../proto`` from this file: the repository's proto/ when building from
   client/python in a checkout;
3. ``./proto``: the copy an sdist carries (setup.py's sdist puts it there), so a
   wheel builds from the sdist alone.

By hand, e.g. to type-check or run from the source tree:

    python gen_proto.py --inplace      # writes ./benchd/v1/ (ignored by git)
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import sys
import tempfile
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["benchd/v1/bench.proto"]


def find_proto_root() -> str:
    candidates: List[str] = []
    env = os.environ.get("BENCHD_PROTO_DIR")
    if env:
        candidates.append(env)
    candidates += [os.path.join(HERE, "..", "..", "proto"), os.path.join(HERE, "proto")]
    for c in candidates:
        if all(os.path.isfile(os.path.join(c, p)) for p in PROTOS):
            return os.path.abspath(c)
    raise RuntimeError(
        "benchd: cannot find the .proto files (benchd/v1/bench.proto) to generate the gRPC stubs "
        f"from; looked in {', '.join(os.path.abspath(c) for c in candidates)}. Build from "
        "client/python inside a benchd checkout, from an sdist, or set BENCHD_PROTO_DIR")


def _plugin(workdir: str, name: str, function: str) -> str:
    """An executable protoc plugin that runs mypy_protobuf.main's `function`
    with this interpreter (the build environment's, whatever PATH says)."""
    path = os.path.join(workdir, f"protoc-gen-{name}")
    with open(path, "w") as f:
        f.write(f"#!{sys.executable}\nimport sys\nfrom mypy_protobuf.main import {function}\n"
                f"sys.exit({function}())\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def generate(out_dir: str, proto_root: Optional[str] = None,
             typed: bool = True) -> Dict[str, Optional[str]]:
    """Writes benchd/v1/* under out_dir; returns the lowest runtimes the
    generated code demands: {"protobuf": "X.Y.Z", "grpcio": "X.Y.Z" or None
    where it demands none}."""
    import grpc_tools
    from grpc_tools import protoc

    root = proto_root or find_proto_root()
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    os.makedirs(out_dir, exist_ok=True)
    args = ["grpc_tools.protoc", f"-I{root}", f"-I{include}", f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}"]
    workdir = tempfile.mkdtemp(prefix="benchd-protoc-")
    try:
        if typed:
            try:
                import mypy_protobuf.main  # noqa: F401
            except ImportError:
                print("benchd: mypy-protobuf not installed; generating no .pyi for the stubs",
                      file=sys.stderr)
            else:
                args += [f"--plugin=protoc-gen-mypy={_plugin(workdir, 'mypy', 'main')}",
                         f"--plugin=protoc-gen-mypy_grpc={_plugin(workdir, 'mypy_grpc', 'grpc')}",
                         f"--mypy_out={out_dir}", f"--mypy_grpc_out={out_dir}"]
        rc = protoc.main(args + [os.path.join(root, p) for p in PROTOS])
        if rc != 0:
            raise RuntimeError(f"benchd: protoc failed ({rc}) on {PROTOS} from {root}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    pkg = os.path.join(out_dir, "benchd", "v1")
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write('"""benchd.v1: the gRPC stubs of proto/benchd/v1/bench.proto, generated at build '
                'time (client/python/gen_proto.py)."""\n')
    return runtime_requirements(pkg)


def runtime_requirements(pkg: str) -> Dict[str, Optional[str]]:
    """What the generated code demands: protobuf's runtime check (gencode 5.26+),
    else the gencode version its header names (protobuf supports a runtime at
    least as new as the gencode); grpcio's GRPC_GENERATED_VERSION (grpcio-tools
    1.63+), else nothing."""
    with open(os.path.join(pkg, "bench_pb2.py")) as f:
        pb2 = f.read()
    with open(os.path.join(pkg, "bench_pb2_grpc.py")) as f:
        grpc_py = f.read()
    m = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*"
                  r"(\d+),\s*(\d+),\s*(\d+),", pb2)
    header = re.search(r"^# Protobuf Python Version: ([0-9]+\.[0-9]+\.[0-9]+)", pb2, re.M)
    g = re.search(r"GRPC_GENERATED_VERSION\s*=\s*'([0-9.]+)'", grpc_py)
    protobuf = ".".join(m.groups()) if m else (header.group(1) if header else None)
    return {"protobuf": protobuf, "grpcio": g.group(1) if g else None}


def main(argv: List[str]) -> int:
    if argv not in (["--inplace"], ["--inplace", "--untyped"]):
        print(__doc__)
        return 2
    req = generate(HERE, typed="--untyped" not in argv)
    print(f"wrote {os.path.join(HERE, 'benchd', 'v1')} (needs protobuf>={req['protobuf']}, "
          f"grpcio>={req['grpcio'] or 'any'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
