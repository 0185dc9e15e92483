"""Build hook: the gRPC stubs (benchd.v1) are generated from the repository's
proto/ by gen_proto.py when the package is built, never committed.

- build_py: after copying the hand-written package, writes benchd/v1/ into the
  build tree (into the source tree for an editable install).
- sdist: puts a copy of the .proto files under proto/ in the sdist, so a wheel
  builds from the sdist alone (gen_proto.find_proto_root looks there last).
- dependencies: the lowest grpcio and protobuf the package supports
  (LOWEST: what the GPU machines' Python may have). The generated code may
  demand more (protobuf's ValidateProtobufRuntimeVersion, grpc's
  GRPC_GENERATED_VERSION, protobuf gencode's own version): the stubs are
  generated once into a temporary folder here to read what they demand, and a
  build whose grpcio-tools demands more than LOWEST fails (pin grpcio-tools in
  pyproject.toml's build requirements instead of raising LOWEST unawares).
"""
import importlib.util
import os
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("benchd_gen_proto", os.path.join(HERE, "gen_proto.py"))
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


# The lowest runtimes declared; tests/lowest (ctest python_client.lowest) runs
# the package on exactly these.
LOWEST = {"grpcio": "1.60.0", "protobuf": "4.25.0"}


def _version(v):
    return tuple(int(x) for x in v.split("."))


def _runtime_requirements():
    tmp = tempfile.mkdtemp(prefix="benchd-req-")
    try:
        need = gen.generate(tmp, typed=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, lowest in LOWEST.items():
        if need.get(name) and _version(need[name]) > _version(lowest):
            raise RuntimeError(
                f"benchd: the stubs generated here need {name}>={need[name]}, above the lowest "
                f"this package declares ({name}>={lowest}, setup.py LOWEST): build with the "
                "grpcio-tools pyproject.toml pins (pip does, in an isolated build), or raise "
                "LOWEST on purpose")
    return LOWEST


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        editable = getattr(self, "editable_mode", False)
        gen.generate(HERE if editable else self.build_lib)

    def get_outputs(self, include_bytecode=True):
        outputs = list(super().get_outputs(include_bytecode))
        v1 = os.path.join(self.build_lib, "benchd", "v1")
        for name in ("__init__.py", "bench_pb2.py", "bench_pb2.pyi", "bench_pb2_grpc.py",
                     "bench_pb2_grpc.pyi"):
            outputs.append(os.path.join(v1, name))
        return outputs


class SdistWithProto(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = gen.find_proto_root()
        for p in gen.PROTOS:
            dest = os.path.join(base_dir, "proto", p)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(os.path.join(root, p), dest)


_req = _runtime_requirements()
setup(
    cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProto},
    install_requires=[
        f"grpcio>={_req['grpcio']}",
        f"protobuf>={_req['protobuf']}",
        "pandas>=1.3",
        "tqdm>=4.60",
        "typing_extensions>=4.1",
    ],
)
