"""Generated protobuf/gRPC stubs for ``memgym.v1`` (memgym_pb2, memgym_pb2_grpc).

Why this package exists: ``grpc_tools.protoc`` writes code that imports ``memgym.v1.memgym_pb2``; the
stubs live at exactly that import path inside the ``memgym`` distribution, generated at build time by
``setup.py`` from the repository's ``proto/memgym/v1/memgym.proto``. Nothing here is hand-written.
"""
