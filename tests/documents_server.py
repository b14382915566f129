"""A client's https server publishing Client ID Metadata Documents, for the authorization
server's tests (tests/hub/test_oauth_clients.py, tests/e2e/test_oauth.py): documents served
whole, or dripped a byte at a time as a hostile client would to hold a fetch open."""

from __future__ import annotations

import datetime
import http.server
import json
import ssl
import threading
import time
from pathlib import Path
from typing import Any


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, as the client's own web server would have (a real one)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cimd.pem", directory / "cimd.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class MetadataServer:
    """Serves `documents` by path; a path in `drip` gets its headers at once, then its document
    one byte every `drip_interval` seconds (a response that never stalls long enough for any one
    read to time out). `hits` lists the paths asked for; `dripping` counts drips under way."""

    def __init__(self, directory: Path, drip_interval: float = 0.3) -> None:
        self.documents: dict[str, dict[str, Any]] = {}
        self.drip: set[str] = set()
        self.hits: list[str] = []
        self.dripping = 0
        self.closing = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits.append(self.path)
                document = server.documents.get(self.path)
                body = json.dumps(document).encode() if document is not None else b"{}"
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.path not in server.drip:
                    self.wfile.write(body)
                    return
                server.dripping += 1
                try:
                    for byte in body:
                        if server.closing.wait(drip_interval):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                except OSError:
                    pass  # the fetcher gave up: what the deadline is for
                finally:
                    server.dripping -= 1

            def log_message(self, *args: Any) -> None:
                pass

        self.cert, key = self_signed(directory)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.base = f"https://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def document(self, path: str, redirect_uri: str, *, name: str = "Published Client") -> str:
        """Publishes a valid document at `path`; returns its client_id."""
        client_id = self.base + path
        self.documents[path] = {
            "client_id": client_id,
            "client_name": name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            # Padding: a drip of it lasts long past any deadline.
            "client_uri": "https://client.example/" + "x" * 200,
        }
        return client_id

    def wait_for_drips(self, count: int, timeout: float = 10) -> None:
        end = time.monotonic() + timeout
        while self.dripping < count and time.monotonic() < end:
            time.sleep(0.02)

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
