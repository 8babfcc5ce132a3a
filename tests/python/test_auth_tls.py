"""API keys and TLS with the released grpcio, through the Python client, against the real binary.

Why this exists: the Rust tests (tests/api/auth.rs, tests/api/tls.rs) use tonic and reqwest; trainers use
grpcio. This shows that grpcio's TLS (trusting the server's CA, or not) and the client's ``api_key`` meet
the server's rustls and key checks as documented: no key, a wrong key, a read-only key on a write, plain
text against TLS. Certificates come from trustme (an expired one is tested in Rust, where rcgen dates it).
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import urllib.error
import urllib.request

import grpc
import pytest
import trustme

from conftest import free_port, memgym_bin, wait_port
from memgym import MemgymClient, MemgymError

RW = "rw-key-0123456789abcdef"
RO = "ro-key-0123456789abcdef"


def _identity(tmp_path):
    """A trustme CA, the server's certificate and key files it issued for localhost, and a key file with a
    read-write and a read-only key."""
    ca = trustme.CA()
    issued = ca.issue_cert("localhost", "127.0.0.1")
    cert, key = tmp_path / "server.pem", tmp_path / "server-key.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    keys = tmp_path / "keys"
    keys.write_text(f"{RW}\n{RO} read-only\n")
    return ca, cert, key, keys


def test_grpcio_over_tls_with_api_keys(tmp_path):
    ca, cert, key, keys = _identity(tmp_path)
    port = free_port()
    address = f"127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(memgym_bin()), "serve", "--addr", address, "--no-banks", "--tls-cert", str(cert), "--tls-key", str(key),
         "--api-key-file", str(keys)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, proc, "memgym serve")  # health needs no key, but TLS: wait for the port
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


def test_http_faces_over_https_with_api_keys(tmp_path):
    ca, cert, key, keys = _identity(tmp_path)
    grpc_port, openenv, mcp, metrics = free_port(), free_port(), free_port(), free_port()
    proc = subprocess.Popen(
        [str(memgym_bin()), "serve", "--addr", f"127.0.0.1:{grpc_port}", "--no-banks", "--tls-cert", str(cert),
         "--tls-key", str(key), "--api-key-file", str(keys), "--openenv-addr", f"127.0.0.1:{openenv}",
         "--mcp-addr", f"127.0.0.1:{mcp}", "--metrics-addr", f"127.0.0.1:{metrics}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)

    def call(port, path, *, key=None, body=None, context=trusting):
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if key:
            headers["authorization"] = f"Bearer {key}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"https://localhost:{port}{path}", data=data, headers=headers)
        try:
            with urllib.request.urlopen(req, context=context, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    try:
        for port in (grpc_port, openenv, mcp, metrics):
            wait_port(port, proc, "memgym serve")
        status, body = call(metrics, "/metrics", key=RO)
        assert status == 200 and "memgym_" in body
        status, body = call(metrics, "/metrics")
        assert status == 401 and json.loads(body)["detail"][0]["reason"] == "API_KEY_MISSING"
        status, body = call(metrics, "/metrics", key="wrong-key-0123456789")
        assert status == 401 and json.loads(body)["detail"][0]["reason"] == "API_KEY_INVALID" and "wrong-key" not in body
        status, body = call(openenv, "/reset", key=RW, body={"episode_id": "https-1", "question_id": "conv-26:q0"})
        assert status == 200, body
        status, body = call(openenv, "/reset", key=RO, body={"episode_id": "https-2", "question_id": "conv-26:q0"})
        assert status == 403 and json.loads(body)["detail"][0]["reason"] == "READ_ONLY_KEY"
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        status, body = call(mcp, "/mcp", key=RW, body=init)
        assert status == 200 and "memgym" in body
        # A client that trusts another CA refuses the certificate; plain HTTP gets no HTTP reply.
        other = ssl.create_default_context()
        trustme.CA().configure_trust(other)
        with pytest.raises(urllib.error.URLError) as err:
            call(openenv, "/health", context=other)
        assert isinstance(err.value.reason, ssl.SSLCertVerificationError)
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(f"http://127.0.0.1:{openenv}/health", timeout=5)
    finally:
        proc.kill()
        proc.wait()
