"""The web process's TCP connections write at once when they can.

Twisted's TCP transport never writes in `write()`: it buffers the bytes, registers the socket
with the reactor for writability and sends them on the reactor's next turn (then unregisters).
For a chat socket that is one more turn of the loop and two `epoll_ctl` calls per fragment, and
every fragment waits for that turn: 0.15 ms of a fragment's p50 latency and a tenth of the web
process's CPU per fragment in the benchmark (bench/RESULTS.md). asyncio's own transports try the
socket first and only buffer what it does not take; `WriteNowServer` does the same. When bytes
are already waiting, new ones queue behind them as before, so the order on the wire never
changes, and Twisted's flow control (producers paused over `bufferSize`) is untouched. Like
asyncio, it also turns Nagle's algorithm off.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import tcp


class WriteNowServer(tcp.Server):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # As asyncio does for every TCP transport: with writes leaving at once, Nagle's algorithm
        # would hold a small write back until the previous one is acknowledged.
        self.setTcpNoDelay(True)

    def write(self, data: bytes) -> None:
        if (
            data
            and type(data) is bytes
            and self.connected
            and not self.TLS  # startTLS: the bytes go through the TLS layer first
            and not self._writeDisconnected
            and not self._tempDataBuffer
            and self.offset >= len(self.dataBuffer)  # nothing buffered: the socket may take it now
        ):
            sent = self.writeSomeData(data)
            if type(sent) is int:  # else the connection is lost: Twisted's own path notices it
                if sent == len(data):
                    return
                data = data[sent:]
        super().write(data)


def install() -> None:
    """Every TCP port the process opens from now on hands its connections to WriteNowServer."""
    tcp.Port.transport = WriteNowServer
