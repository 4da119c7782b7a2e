#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_h2_session (tests/fuzz/corpus/h2_session/).

Each seed is the option byte of session_harness.hpp ('0' to '3': how the
client ends) and the frames a client sends after the connection preface (the
target supplies the preface). Header blocks use HPACK's static table and
literals without Huffman coding, so no HPACK library is needed.

    python3 tests/fuzz/make_h2_seeds.py
"""
import os
import struct

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    0, 1, 2, 3, 4, 6, 7, 8, 9)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def settings(**values):
    ids = {"header_table_size": 1, "enable_push": 2, "max_concurrent_streams": 3,
           "initial_window_size": 4, "max_frame_size": 5, "max_header_list_size": 6}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in values.items()))


def integer(value, prefix_bits, first=0):
    """HPACK integer (RFC 7541 5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def string(s):
    s = s.encode()
    return integer(len(s), 7) + s


STATIC = {(":method", "GET"): 2, (":method", "POST"): 3, (":path", "/"): 4, (":scheme", "http"): 6}
STATIC_NAMES = {":authority": 1, ":method": 2, ":path": 4, "content-length": 28, "content-type": 31}


def block(fields, index=False):
    """A header block: static-table hits indexed, the rest literals (incremental
    indexing when `index`, so a later block can refer to them)."""
    out = b""
    for name, value in fields:
        if (name, value) in STATIC:
            out += integer(STATIC[(name, value)], 7, 0x80)
            continue
        if index:
            first, bits = 0x40, 6
        else:
            first, bits = 0x00, 4
        if name in STATIC_NAMES:
            out += integer(STATIC_NAMES[name], bits, first) + string(value)
        else:
            out += bytes([first]) + string(name) + string(value)
    return out


def request(method, path, extra=(), index=False):
    return block([(":method", method), (":scheme", "http"), (":path", path),
                  (":authority", "relay")] + list(extra), index)


BODY = b'{"model":"kimi-k2","messages":[],"stream":true}'

SEEDS = {
    "get": b"0" + settings() + frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/v1/models")),
    "post-with-content-length": b"0" + settings(initial_window_size=65535) + frame(SETTINGS, ACK, 0)
    + frame(HEADERS, END_HEADERS, 1, request("POST", "/v1/chat/completions",
                                            [("content-type", "application/json"),
                                             ("content-length", str(len(BODY)))]))
    + frame(DATA, 0, 1, BODY[:20]) + frame(DATA, END_STREAM, 1, BODY[20:]),
    "streams-of-every-kind": b"0" + settings(max_concurrent_streams=100, header_table_size=256)
    + frame(HEADERS, END_HEADERS, 1, request("POST", "/s", [("x-request-id", "abc")], index=True))
    + frame(DATA, 0, 1, b"hello") + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 65536))
    + frame(PING, 0, 0, b"12345678") + frame(DATA, END_STREAM, 1, b" world")
    + frame(HEADERS, END_STREAM | END_HEADERS, 3, request("GET", "/n", index=True))
    + frame(HEADERS, END_STREAM | END_HEADERS, 5, request("HEAD", "/"))
    + frame(HEADERS, END_STREAM | END_HEADERS, 7, request("GET", "/a"))
    + frame(HEADERS, END_STREAM | END_HEADERS, 9, request("GET", "/h")),
    "continuation": b"3" + settings()
    + frame(HEADERS, END_STREAM, 1, request("GET", "/s", [("x-a", "1" * 40)])[:20])
    + frame(CONTINUATION, 0, 1, request("GET", "/s", [("x-a", "1" * 40)])[20:30])
    + frame(CONTINUATION, END_HEADERS, 1, request("GET", "/s", [("x-a", "1" * 40)])[30:]),
    "padded-priority-trailers": b"0" + settings()
    + frame(HEADERS, END_HEADERS | PADDED | PRIORITY_FLAG, 1,
            bytes([3]) + struct.pack(">IB", 0, 15) + request("POST", "/") + b"\0\0\0")
    + frame(PRIORITY, 0, 1, struct.pack(">IB", 0, 200))
    + frame(DATA, PADDED, 1, bytes([2]) + b"abc" + b"\0\0")
    + frame(HEADERS, END_STREAM | END_HEADERS, 1, block([("x-trailer", "t")])),
    "reset-while-waiting": b"0" + settings()
    + frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/w"))
    + frame(RST_STREAM, 0, 1, struct.pack(">I", 8)),
    "eof-while-waiting": b"1" + settings() + frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/w")),
    "content-length-too-large": b"0" + settings()
    + frame(HEADERS, END_HEADERS, 1, request("POST", "/", [("content-length", "5000")]))
    + frame(DATA, END_STREAM, 1, b"x" * 100),
    "body-too-large": b"0" + settings()
    + frame(HEADERS, END_HEADERS, 1, request("POST", "/"))
    + frame(DATA, 0, 1, b"x" * 4000) + frame(DATA, END_STREAM, 1, b"y" * 200),
    "headers-too-large": b"0" + settings()
    + frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/", [("x-big", "b" * 1100)]))
    + frame(HEADERS, END_STREAM | END_HEADERS, 3, request("GET", "/", [("x-huge", "h" * 5000)])),
    "silent-body-timeout": b"2" + settings()
    + frame(HEADERS, END_HEADERS, 1, request("POST", "/", [("content-length", "10")]))
    + frame(DATA, 0, 1, b"abc"),
    "silent-after-answers": b"2" + settings()
    + frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/s"))
    + frame(HEADERS, END_STREAM | END_HEADERS, 3, request("GET", "/w")),
    "client-goaway": b"0" + settings()
    + frame(HEADERS, END_STREAM | END_HEADERS, 1, request("GET", "/"))
    + frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)),
    "refused-streams": b"0" + settings() + b"".join(
        frame(HEADERS, END_HEADERS, i, request("POST", "/w")) for i in range(1, 13, 2)),
    "not-a-settings-frame": b"0" + frame(PING, 0, 0, b"12345678"),
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "h2_session")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
