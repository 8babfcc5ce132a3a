"""API keys and TLS with the released grpcio, through the Python client, against the real binary.

Why this exists: the Rust tests (tests/api/auth.rs, tests/api/tls.rs) use tonic and reqwest; trainers use
grpcio. This shows that grpcio's TLS (trusting the server's CA, or not) and the client's ``api_key`` meet
the server's rustls and key checks as documented: no key, a wrong key, a read-only key on a write, plain
text against TLS. Certificates come from trustme (an expired one is tested in Rust, where rcgen dates it).
"""

from __future__ import annotations

import socket
import subprocess
import time

import grpc
import pytest
import trustme

from conftest import free_port, memgym_bin
from memgym import MemgymClient, MemgymError

RW = "rw-key-0123456789abcdef"
RO = "ro-key-0123456789abcdef"


def test_grpcio_over_tls_with_api_keys(tmp_path):
    ca = trustme.CA()
    issued = ca.issue_cert("localhost", "127.0.0.1")
    cert, key = tmp_path / "server.pem", tmp_path / "server-key.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    keys = tmp_path / "keys"
    keys.write_text(f"{RW}\n{RO} read-only\n")
    port = free_port()
    address = f"127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(memgym_bin()), "serve", "--addr", address, "--no-banks", "--tls-cert", str(cert), "--tls-key", str(key),
         "--api-key-file", str(keys)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # health needs no key, but TLS: wait for the port, then for a served call
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "memgym serve did not listen"
                time.sleep(0.1)
        ca = ca.cert_pem.bytes()
        with MemgymClient(address, api_key=RW, root_certificates=ca, retries=0) as c:
            assert c.create_episode("conv-26:q0", episode_id="tls-1").created
            assert len(c.list_tools()) == 6
        with MemgymClient(address, root_certificates=ca, retries=0) as anonymous, pytest.raises(MemgymError) as err:
            anonymous.list_tools()
        assert err.value.code == grpc.StatusCode.UNAUTHENTICATED and err.value.reason == "API_KEY_MISSING"
        wrong = MemgymClient(address, api_key="wrong-key-0123456789", root_certificates=ca, retries=0)
        with wrong, pytest.raises(MemgymError) as err:
            wrong.list_tools()
        assert err.value.reason == "API_KEY_INVALID" and "wrong-key" not in str(err.value)
        with MemgymClient(address, api_key=RO, root_certificates=ca, retries=0) as reader:
            assert len(reader.list_tools()) == 6
            with pytest.raises(MemgymError) as err:
                reader.create_episode("conv-26:q0", episode_id="tls-2")
            assert err.value.code == grpc.StatusCode.PERMISSION_DENIED and err.value.reason == "READ_ONLY_KEY"
        # Plain text is not served; a CA the client does not trust fails the handshake.
        with MemgymClient(address, api_key=RW, retries=0, timeout=3) as plain, pytest.raises(MemgymError) as err:
            plain.list_tools()
        assert err.value.code == grpc.StatusCode.UNAVAILABLE
        untrusting = MemgymClient(address, api_key=RW, root_certificates=trustme.CA().cert_pem.bytes(), retries=0, timeout=3)
        with untrusting, pytest.raises(MemgymError) as err:
            untrusting.list_tools()
        assert err.value.code == grpc.StatusCode.UNAVAILABLE
    finally:
        proc.kill()
        proc.wait()
