"""The default HTTP path's socket layer (``models.asyncio_network``): it is what the default client's pools
run on, it serves TLS endpoints (with the CA the environment names), keeps connections alive, and carries
answers far larger than its read buffer intact. The fault suite (test_models_transport_faults.py) runs
every transport fault through it."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from pathlib import Path

import pytest
from fault_server_kit import FaultHandler

from evoaudit import config as config_mod
from evoaudit.models import asyncio_network
from evoaudit.models.asyncio_network import HIGH_WATER, AsyncioBackend
from evoaudit.models.base import ChatRequest, InfraFailure
from evoaudit.models.http import Reply, ServerThread
from evoaudit.models.http_client import make_http_client
from evoaudit.models.openai_backend import OpenAIBackend
from evoaudit.records import Message


def _endpoint(base_url: str, concurrency: int = 4):
    raw = {"backend": "openai", "base_url": base_url, "cache": False, "concurrency": concurrency}
    return config_mod.from_dict({"executor": raw}).executor


def _request(n: int) -> ChatRequest:
    return ChatRequest(messages=[Message(role="system", content="s"), Message(role="user", content=f"t{n}")])


@pytest.mark.parametrize("concurrency", [4, 100])  # one pool, and several
def test_the_default_clients_pools_run_on_asyncio_transports(concurrency):
    transport = make_http_client(_endpoint("http://127.0.0.1:9/v1", concurrency))._transport
    pools = [t._pool for t in getattr(transport, "_pools", [transport])]
    assert pools and all(isinstance(p._network_backend, AsyncioBackend) for p in pools)


def test_a_proxied_endpoint_keeps_httpx_own_client(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    transport = make_http_client(_endpoint("http://10.1.2.3:8000/v1"))._transport
    assert not isinstance(transport._pool._network_backend, AsyncioBackend)


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def _tls_endpoint(tmp_path: Path) -> tuple[Path, ssl.SSLContext]:
    """A self-signed certificate, and the server's TLS context that presents it."""
    cert, key = _self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    return cert, server_tls


def test_an_https_endpoint_is_served_over_tls_with_the_ca_the_environment_names(tmp_path, monkeypatch):
    cert, server_tls = _tls_endpoint(tmp_path)
    handler = FaultHandler()
    with ServerThread(handler, tls=server_tls) as server:
        assert server.base_url.startswith("https://")
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        backend = OpenAIBackend(_endpoint(server.base_url))

        async def go():
            first = await backend.complete(_request(0))
            opened = server.server.connections
            return [first] + [await backend.complete(_request(i)) for i in (1, 2)], opened

        replies, opened = asyncio.run(go())
        assert server.server.connections == opened  # the TLS connection was kept alive and reused
    assert not [r for r in replies if isinstance(r, InfraFailure)]
    assert len(handler.seen) == backend.attempts == 3


def test_an_untrusted_certificate_is_a_connection_failure_not_an_answer(tmp_path, monkeypatch):
    cert, server_tls = _tls_endpoint(tmp_path)
    handler = FaultHandler()
    with ServerThread(handler, tls=server_tls) as server:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        raw = {"backend": "openai", "base_url": server.base_url, "cache": False, "max_retries": 0}
        backend = OpenAIBackend(config_mod.from_dict({"executor": raw}).executor)
        with pytest.raises(InfraFailure) as failure:
            asyncio.run(backend.complete(_request(0)))
    assert failure.value.kind == "retries_exhausted" and "CERTIFICATE_VERIFY_FAILED" in str(failure.value)
    assert handler.seen == []


def test_an_answer_larger_than_the_read_buffer_arrives_whole_over_one_kept_alive_connection(monkeypatch):
    size = 5 * HIGH_WATER + 123
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    pauses = []
    received = asyncio_network._Protocol.data_received

    def counting(self, data):  # record each time the buffer's high-water mark stops reading
        was = self.reading_paused
        received(self, data)
        pauses.append(self.reading_paused and not was)

    monkeypatch.setattr(asyncio_network._Protocol, "data_received", counting)

    async def big(req):
        return Reply(200, body, {"content-type": "application/octet-stream"})

    with ServerThread(big) as server:
        client = make_http_client(_endpoint(server.base_url))

        async def go():
            # A slow reader first: the socket's bytes pile up past the high-water mark, reading pauses
            # and resumes as the reader catches up. Then a fast one on the same connection.
            async with client.stream("GET", server.base_url + "/blob") as response:
                slow = b""
                async for chunk in response.aiter_raw():
                    slow += chunk
                    if len(slow) < 3 * HIGH_WATER:
                        await asyncio.sleep(0.02)
            fast = (await client.get(server.base_url + "/blob")).content
            await client.aclose()
            return slow, fast

        slow, fast = asyncio.run(go())
        assert server.server.connections == 1  # the second request reused the connection
    assert slow == body and fast == body
    assert any(pauses)
