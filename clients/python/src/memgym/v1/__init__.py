"""Generated protobuf/gRPC stubs for ``memgym.v1`` (memgym_pb2, memgym_pb2_grpc, banks_pb2, banks_pb2_grpc).

Why this package exists: ``grpc_tools.protoc`` writes code that imports ``memgym.v1.memgym_pb2`` and
``memgym.v1.banks_pb2``; the stubs live at exactly those import paths inside the ``memgym`` distribution,
generated at build time by ``setup.py`` from the repository's ``proto/memgym/v1/memgym.proto`` and
``banks.proto``. Nothing here is hand-written.
"""
