"""The web process's TCP connections (config/tcp.py): a write reaches the socket at once, and
what the socket cannot take yet is sent after, in order. Twisted's reactor runs once per
process: each check runs in a child process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import socket, sys
    from twisted.internet import protocol, reactor, tcp
    from config import tcp as write_now

    if sys.argv[1] == "write-now":
        write_now.install()
    big = b"x" * (8 << 20)  # far more than a socket buffer takes at once
    found = {}

    class Server(protocol.Protocol):
        def connectionMade(self):
            reactor.callLater(0.05, self.go)

        def go(self):
            found["nodelay"] = self.transport.getTcpNoDelay()
            self.transport.write(b"hello")
            try:  # no turn of the reactor in between
                found["at once"] = client.recv(100, socket.MSG_DONTWAIT)
            except BlockingIOError:
                found["at once"] = b""
            self.transport.write(big)
            self.transport.write(b"END")  # behind what is still buffered
            reactor.callInThread(read_all)

    def read_all():
        client.setblocking(True)
        received = bytearray()
        while not received.endswith(b"END"):
            received += client.recv(1 << 20)
        # Everything, once, in the order written.
        found["rest"] = found["at once"] + bytes(received) == b"hello" + big + b"END"
        reactor.callFromThread(reactor.stop)

    port = reactor.listenTCP(0, protocol.Factory.forProtocol(Server), interface="127.0.0.1")
    client = socket.create_connection(("127.0.0.1", port.getHost().port))
    reactor.callLater(20, reactor.stop)
    reactor.run()
    print(found.get("at once"), found.get("rest"), bool(found.get("nodelay")))
    """
)


def run(mode: str) -> str:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_a_write_reaches_the_socket_before_the_reactor_turns() -> None:
    assert run("write-now") == "b'hello' True True"  # and without Nagle's delay


def test_twisted_alone_waits_for_the_reactor() -> None:
    # What config/tcp.py changes: Twisted's own transport buffers until the reactor's next turn.
    assert run("twisted") == "b'' True False"
