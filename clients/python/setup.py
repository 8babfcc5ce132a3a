"""Build hook: generate the gRPC stubs from the repository's .proto at build/install time.

Why this exists: the contract lives once, in ``proto/memgym/v1/memgym.proto`` at the repository root,
and the Python stubs must never drift from it. Every build (``pip install ./clients/python``, a wheel, an
sdist) therefore

1. copies ``../../proto/memgym/v1/memgym.proto`` into ``src/memgym/v1/`` when the repository is there
   (an sdist carries that copy, so it also builds away from the repository), then
2. runs ``grpc_tools.protoc`` on it, writing ``src/memgym/v1/memgym_pb2.py``, ``memgym_pb2_grpc.py`` and
   ``memgym_pb2.pyi``.

The generated code imports ``memgym.v1.memgym_pb2``; generating into the ``memgym`` package itself
makes that import path real without touching ``sys.path``.

It also pins the runtime: generated code refuses to import on a protobuf/grpcio older than it was
generated for, so the lower bounds are read from the generated files themselves.
"""

import os
import re
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_PROTO_ROOT = os.path.join(HERE, "src")
PKG_PROTO = os.path.join(PKG_PROTO_ROOT, "memgym", "v1", "memgym.proto")
REPO_PROTO = os.path.normpath(os.path.join(HERE, "..", "..", "proto", "memgym", "v1", "memgym.proto"))


def copy_proto() -> None:
    """Refreshes the package's copy of the .proto from the repository, when the repository is there."""
    if os.path.isfile(REPO_PROTO):
        os.makedirs(os.path.dirname(PKG_PROTO), exist_ok=True)
        shutil.copyfile(REPO_PROTO, PKG_PROTO)
    if not os.path.isfile(PKG_PROTO):
        raise SystemExit(f"memgym.proto not found: neither {REPO_PROTO} nor {PKG_PROTO} exists")


def generate_stubs() -> None:
    """Runs grpc_tools.protoc on the package's copy of the .proto."""
    copy_proto()
    from grpc_tools import protoc  # build-system requirement
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = [
        "grpc_tools.protoc",
        f"-I{PKG_PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={PKG_PROTO_ROOT}",
        f"--pyi_out={PKG_PROTO_ROOT}",
        f"--grpc_python_out={PKG_PROTO_ROOT}",
        os.path.join("memgym", "v1", "memgym.proto"),
    ]
    cwd = os.getcwd()
    os.chdir(PKG_PROTO_ROOT)  # protoc wants the file path relative to an -I root
    try:
        if protoc.main(args) != 0:
            raise SystemExit("grpc_tools.protoc failed on memgym.proto")
    finally:
        os.chdir(cwd)


def runtime_requirements() -> list:
    """grpcio/protobuf at least as new as the generated code demands (it checks both at import).

    The stubs are generated here already (metadata is computed before build_py runs) and the versions
    are read from them: ``GRPC_GENERATED_VERSION`` and the ``ValidateProtobufRuntimeVersion`` call.
    """
    try:
        generate_stubs()
        v1 = os.path.dirname(PKG_PROTO)
        with open(os.path.join(v1, "memgym_pb2_grpc.py")) as f:
            grpc_min = re.search(r"GRPC_GENERATED_VERSION = '([0-9.]+)'", f.read()).group(1)
        with open(os.path.join(v1, "memgym_pb2.py")) as f:
            m = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+)", f.read())
        proto_min = ".".join(m.groups()) if m else "4.25"
        return [f"grpcio>={grpc_min}", f"protobuf>={proto_min}"]
    except Exception as err:  # no grpc_tools in this environment (metadata-only tooling)
        print(f"memgym-client: using default runtime bounds ({err})", file=sys.stderr)
        return ["grpcio>=1.62", "protobuf>=4.25"]


class BuildPyWithStubs(build_py):
    """build_py that generates the stubs first, so they land in the wheel."""

    def run(self):
        generate_stubs()
        super().run()


class SdistWithProto(sdist):
    """sdist that carries a fresh copy of the .proto."""

    def run(self):
        copy_proto()
        super().run()


setup(
    cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProto},
    install_requires=runtime_requirements(),
)
