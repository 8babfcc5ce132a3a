"""Build hook: generate the gRPC stubs from the repository's .proto at build/install time.

Why this exists: the contract lives once, in ``proto/memgym/v1/`` at the repository root
(``memgym.proto``: the episode services; ``banks.proto``: the Banks service; ``agent.proto``: the
AgentMemory service; ``learn.proto``: the Learn service), and the Python stubs must never drift from it.
Every build (``pip install ./clients/python``, a wheel, an sdist) therefore

1. copies ``../../proto/memgym/v1/{memgym,banks,agent,learn}.proto`` into ``src/memgym/v1/`` when the
   repository is there (an sdist carries those copies, so it also builds away from the repository), then
2. runs ``grpc_tools.protoc`` on them, writing ``src/memgym/v1/memgym_pb2.py``, ``memgym_pb2_grpc.py``,
   ``memgym_pb2.pyi`` and the same three for ``banks``, ``agent`` and ``learn``.

The generated code imports ``memgym.v1.memgym_pb2``, ``memgym.v1.banks_pb2``, ``memgym.v1.agent_pb2`` and
``memgym.v1.learn_pb2``; generating into the ``memgym`` package itself makes those import paths real
without touching ``sys.path``.

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
PKG_V1 = os.path.join(PKG_PROTO_ROOT, "memgym", "v1")
REPO_V1 = os.path.normpath(os.path.join(HERE, "..", "..", "proto", "memgym", "v1"))
#: google.rpc's Status, ErrorInfo and RetryInfo, which the server's status details carry (memgym.errors).
GOOGLEAPIS = "googleapis-common-protos>=1.63"
#: The .proto files of package memgym.v1 the client is generated from (each its own ``*_pb2`` module).
PROTOS = ("memgym.proto", "banks.proto", "agent.proto", "learn.proto")


def copy_proto() -> None:
    """Refreshes the package's copies of the .proto files from the repository, when the repository is there."""
    for name in PROTOS:
        repo, pkg = os.path.join(REPO_V1, name), os.path.join(PKG_V1, name)
        if os.path.isfile(repo):
            os.makedirs(PKG_V1, exist_ok=True)
            shutil.copyfile(repo, pkg)
        if not os.path.isfile(pkg):
            raise SystemExit(f"{name} not found: neither {repo} nor {pkg} exists")


def generate_stubs() -> None:
    """Runs grpc_tools.protoc on the package's copies of the .proto files (one run, so they agree)."""
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
        *(os.path.join("memgym", "v1", name) for name in PROTOS),
    ]
    cwd = os.getcwd()
    os.chdir(PKG_PROTO_ROOT)  # protoc wants the file path relative to an -I root
    try:
        if protoc.main(args) != 0:
            raise SystemExit(f"grpc_tools.protoc failed on {', '.join(PROTOS)}")
    finally:
        os.chdir(cwd)


def runtime_requirements() -> list:
    """grpcio/protobuf at least as new as the generated code demands (it checks both at import).

    The stubs are generated here already (metadata is computed before build_py runs) and the versions
    are read from them: ``GRPC_GENERATED_VERSION`` and the ``ValidateProtobufRuntimeVersion`` call.
    """
    try:
        generate_stubs()
        with open(os.path.join(PKG_V1, "memgym_pb2_grpc.py")) as f:
            grpc_min = re.search(r"GRPC_GENERATED_VERSION = '([0-9.]+)'", f.read()).group(1)
        with open(os.path.join(PKG_V1, "memgym_pb2.py")) as f:
            m = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+)", f.read())
        proto_min = ".".join(m.groups()) if m else "4.25"
        return [f"grpcio>={grpc_min}", f"protobuf>={proto_min}", GOOGLEAPIS]
    except Exception as err:  # no grpc_tools in this environment (metadata-only tooling)
        print(f"memgym-client: using default runtime bounds ({err})", file=sys.stderr)
        return ["grpcio>=1.62", "protobuf>=4.25", GOOGLEAPIS]


class BuildPyWithStubs(build_py):
    """build_py that generates the stubs first, so they land in the wheel."""

    def run(self):
        generate_stubs()
        super().run()


class SdistWithProto(sdist):
    """sdist that carries fresh copies of the .proto files."""

    def run(self):
        copy_proto()
        super().run()


setup(
    cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProto},
    install_requires=runtime_requirements(),
)
