#!/usr/bin/env python3
"""Callers that read their SSE streams slowly: the load of bench/slow_readers.sh.

Each of CONNS keep-alive HTTP/1.1 connections asks for a stream, reads it at
RATE bytes per second through a receive buffer of RCVBUF bytes, and asks for
the next as soon as one has ended, for DURATION seconds. A proxy in front of a
fast upstream must then hold, or stop reading, what its caller does not take.

Prints one JSON object: streams completed, streams that ended wrong (not
200, or no `data: [DONE]` before the body's end), bytes read, and streams
still open at the end.

    slow_reader.py --port 8080 --key KEY --body stream.json \
        --conns 200 --rate 65536 --rcvbuf 8192 --duration 15
"""
import argparse
import json
import socket
import time

END = b"\r\n0\r\n\r\n"  # a chunked body's last chunk
DONE = b"data: [DONE]"


class Conn:
    def __init__(self, port, request, rcvbuf):
        self.request = request
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Before connect(): the window offered to the proxy follows from it.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.open = True
        self.begin()

    def begin(self):
        self.tail = b""
        self.head_seen = False
        self.status_ok = False
        self.saw_done = False
        self.sock.sendall(self.request)  # a few hundred bytes: fits at once

    def take(self, data):
        """Bytes read; returns 'done', 'failed' or None (the stream goes on)."""
        look = self.tail + data
        if not self.head_seen:
            end = look.find(b"\r\n\r\n")
            if end < 0:
                self.tail = look[-4096:]
                return None
            self.head_seen = True
            self.status_ok = look.startswith(b"HTTP/1.1 200")
        if DONE in look:
            self.saw_done = True
        self.tail = look[-64:]
        if look.endswith(END):
            return "done" if self.status_ok and self.saw_done else "failed"
        return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--conns", type=int, default=200)
    p.add_argument("--rate", type=int, default=65536, help="bytes per second per connection")
    p.add_argument("--rcvbuf", type=int, default=8192)
    p.add_argument("--duration", type=float, default=15)
    p.add_argument("--tick-ms", type=float, default=20)
    a = p.parse_args()

    body = open(a.body, "rb").read()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + b"Authorization: Bearer " + a.key.encode() + b"\r\n"
        + b"Content-Type: application/json\r\n"
        + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    conns = [Conn(a.port, request, a.rcvbuf) for _ in range(a.conns)]
    per_tick = max(1, int(a.rate * a.tick_ms / 1000))
    done = failed = 0
    read = 0
    start = time.monotonic()
    next_tick = start
    while True:
        now = time.monotonic()
        if now - start >= a.duration:
            break
        if now < next_tick:
            time.sleep(next_tick - now)
        next_tick += a.tick_ms / 1000
        for c in conns:
            if not c.open:
                continue
            try:
                data = c.sock.recv(per_tick)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:  # the proxy closed the connection
                c.open = False
                failed += 1
                continue
            read += len(data)
            verdict = c.take(data)
            if verdict == "done":
                done += 1
                c.begin()
            elif verdict == "failed":
                failed += 1
                c.begin()
    still_open = sum(1 for c in conns if c.open)
    print(json.dumps({"completed": done, "failed": failed, "bytes": read, "open": still_open,
                      "seconds": round(time.monotonic() - start, 2)}))


if __name__ == "__main__":
    main()
