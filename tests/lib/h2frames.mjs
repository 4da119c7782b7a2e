// HTTP/2 at the byte level (RFC 9113 §4, §6), for tests that must do what a
// well-behaved client library will not: split the connection preface across
// TCP writes, or follow it with garbage.
//
//   PREFACE                        the 24-byte client connection preface
//   frame(type, flags, id, body)   one encoded frame
//   settingsFrame(), pingFrame(8 bytes), headersFrame(id, fields), dataFrame(), ...
//   connectRaw(port)               a raw TCP socket with a frame reader:
//     {socket, write(buf), received(), frames, nextFrame(pred, timeoutMs), closed}
//     frames are {at, length, type, flags, streamId, payload}, `at` being
//     performance.now() on arrival

import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const TYPE = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
};
export const TYPE_NAME = Object.fromEntries(Object.entries(TYPE).map(([k, v]) => [v, k]));

export const FLAG = { ACK: 0x1, END_STREAM: 0x1, END_HEADERS: 0x4 };

export const ERROR_NAME = {
  0x0: 'NO_ERROR',
  0x1: 'PROTOCOL_ERROR',
  0x2: 'INTERNAL_ERROR',
  0x3: 'FLOW_CONTROL_ERROR',
  0x4: 'SETTINGS_TIMEOUT',
  0x5: 'STREAM_CLOSED',
  0x6: 'FRAME_SIZE_ERROR',
  0x7: 'REFUSED_STREAM',
  0x8: 'CANCEL',
  0x9: 'COMPRESSION_ERROR',
  0xa: 'CONNECT_ERROR',
  0xb: 'ENHANCE_YOUR_CALM',
  0xc: 'INADEQUATE_SECURITY',
  0xd: 'HTTP_1_1_REQUIRED',
};

export function frame(type, flags, streamId, payload = Buffer.alloc(0)) {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head.writeUInt8(type, 3);
  head.writeUInt8(flags, 4);
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

// SETTINGS with {id: value} pairs (empty by default).
export function settingsFrame(values = {}) {
  const body = Buffer.alloc(6 * Object.keys(values).length);
  Object.entries(values).forEach(([id, value], i) => {
    body.writeUInt16BE(Number(id), 6 * i);
    body.writeUInt32BE(value, 6 * i + 2);
  });
  return frame(TYPE.SETTINGS, 0, 0, body);
}

export const SETTING = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
};

// The {id: value} pairs of a received SETTINGS frame.
export function parseSettings(f) {
  const values = {};
  for (let at = 0; at + 6 <= f.payload.length; at += 6) {
    values[f.payload.readUInt16BE(at)] = f.payload.readUInt32BE(at + 2);
  }
  return values;
}

export const settingsAck = () => frame(TYPE.SETTINGS, FLAG.ACK, 0);
export const pingFrame = (opaque) => frame(TYPE.PING, 0, 0, opaque);

export function windowUpdateFrame(streamId, increment) {
  const body = Buffer.alloc(4);
  body.writeUInt32BE(increment & 0x7fffffff);
  return frame(TYPE.WINDOW_UPDATE, 0, streamId, body);
}

export const dataFrame = (streamId, payload, { endStream = false } = {}) =>
  frame(TYPE.DATA, endStream ? FLAG.END_STREAM : 0, streamId, Buffer.from(payload));

export function rstStreamFrame(streamId, errorCode) {
  const body = Buffer.alloc(4);
  body.writeUInt32BE(errorCode);
  return frame(TYPE.RST_STREAM, 0, streamId, body);
}

// PRIORITY (RFC 9113 §6.3): non-exclusive dependency on `dependsOn`, weight 16.
export function priorityFrame(streamId, dependsOn = 0, weight = 16) {
  const body = Buffer.alloc(5);
  body.writeUInt32BE(dependsOn & 0x7fffffff);
  body.writeUInt8(weight - 1, 4);
  return frame(TYPE.PRIORITY, 0, streamId, body);
}

// HPACK integer with an n-bit prefix (RFC 7541 §5.1).
function hpackInteger(value, prefixBits, firstByteFlags = 0) {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [firstByteFlags | value];
  const out = [firstByteFlags | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

// A header block of "literal without indexing, new name" fields with plain
// (not Huffman) strings (RFC 7541 §6.2.2): valid for any decoder and needs no
// table state. `fields` is [[name, value], ...], pseudo-headers first.
export function encodeHeaderBlock(fields) {
  const bytes = [];
  for (const [name, value] of fields) {
    const n = Buffer.from(name.toLowerCase(), 'latin1');
    const v = Buffer.from(String(value), 'latin1');
    bytes.push(0x00, ...hpackInteger(n.length, 7), ...n, ...hpackInteger(v.length, 7), ...v);
  }
  return Buffer.from(bytes);
}

// Header-list size of `fields` as RFC 7541 §4.1 (and SETTINGS_MAX_HEADER_LIST_SIZE) counts it:
// name + value + 32 octets per field.
export const headerListSize = (fields) =>
  fields.reduce((n, [name, value]) => n + Buffer.byteLength(name, 'latin1') + Buffer.byteLength(String(value), 'latin1') + 32, 0);

// HPACK representations that use the dynamic table (RFC 7541 §6.1, §6.2.1), for
// header blocks that decode to far more than they weigh on the wire:
//   hpackIncrementalLiteral(name, value)  literal with incremental indexing, new
//                                         name: the field becomes dynamic entry 62
//   hpackIndexed(index)                   indexed field (62 = the newest dynamic entry)
export function hpackIncrementalLiteral(name, value) {
  const n = Buffer.from(name.toLowerCase(), 'latin1');
  const v = Buffer.from(String(value), 'latin1');
  return Buffer.from([0x40, ...hpackInteger(n.length, 7), ...n, ...hpackInteger(v.length, 7), ...v]);
}
export const hpackIndexed = (index) => Buffer.from(hpackInteger(index, 7, 0x80));

// A HEADERS frame around an already encoded header block.
export const headersFrameRaw = (streamId, block, { endStream = false, endHeaders = true } = {}) =>
  frame(TYPE.HEADERS, (endHeaders ? FLAG.END_HEADERS : 0) | (endStream ? FLAG.END_STREAM : 0), streamId, block);

// The :status of a response HEADERS frame, decoded just far enough: the first
// representation, a static-table index or a literal (plain or Huffman-coded
// digits). Needs a server that cannot refer to its dynamic table, i.e. a client
// that announced SETTINGS_HEADER_TABLE_SIZE 0; a leading table-size update is skipped.
const STATIC_STATUS = { 8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500 };
const HUFFMAN_DIGITS = [
  ['00000', '0'], ['00001', '1'], ['00010', '2'], ['011001', '3'], ['011010', '4'],
  ['011011', '5'], ['011100', '6'], ['011101', '7'], ['011110', '8'], ['011111', '9'],
];
export function responseStatus(f) {
  let at = 0;
  const p = f.payload;
  const readInt = (prefixBits) => {
    const max = (1 << prefixBits) - 1;
    let value = p[at++] & max;
    if (value < max) return value;
    let shift = 0;
    for (;;) {
      const b = p[at++];
      value += (b & 0x7f) * 2 ** shift;
      shift += 7;
      if (!(b & 0x80)) return value;
    }
  };
  while ((p[at] & 0xe0) === 0x20) readInt(5); // dynamic table size update
  const first = p[at];
  if (first & 0x80) {
    const index = readInt(7);
    if (!(index in STATIC_STATUS)) throw new Error(`:status is indexed field ${index}`);
    return STATIC_STATUS[index];
  }
  const index = first & 0x40 ? readInt(6) : readInt(4);
  if (index !== 8) throw new Error(`first field is not :status (name index ${index})`);
  const huffman = (p[at] & 0x80) !== 0;
  const length = readInt(7);
  const bytes = p.subarray(at, at + length);
  if (!huffman) return Number(bytes.toString('latin1'));
  let bits = [...bytes].map((b) => b.toString(2).padStart(8, '0')).join('');
  let text = '';
  while (bits.length > 0 && !/^1{1,7}$/.test(bits)) {
    const hit = HUFFMAN_DIGITS.find(([code]) => bits.startsWith(code));
    if (!hit) throw new Error(`:status is not Huffman-coded digits: ${bytes.toString('hex')}`);
    text += hit[1];
    bits = bits.slice(hit[0].length);
  }
  return Number(text);
}

export const headersFrame = (streamId, fields, { endStream = false } = {}) =>
  frame(TYPE.HEADERS, FLAG.END_HEADERS | (endStream ? FLAG.END_STREAM : 0), streamId, encodeHeaderBlock(fields));

// Decodes a GOAWAY payload.
export function parseGoaway(f) {
  const code = f.payload.readUInt32BE(4);
  return {
    lastStreamId: f.payload.readUInt32BE(0) & 0x7fffffff,
    errorCode: code,
    errorName: ERROR_NAME[code] ?? `0x${code.toString(16)}`,
    debug: f.payload.subarray(8).toString('latin1'),
  };
}

export function describeFrame(f) {
  const type = TYPE_NAME[f.type] ?? `type 0x${f.type.toString(16)}`;
  return `${type} flags=0x${f.flags.toString(16)} stream=${f.streamId} length=${f.length}`;
}

// A raw TCP connection to 127.0.0.1:port that parses whatever comes back as
// HTTP/2 frames (the bytes are also kept as they are, for a server that
// answers with something else).
export async function connectRaw(port) {
  const socket = connect({ host: '127.0.0.1', port, noDelay: true });
  await new Promise((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const chunks = [];
  const frames = [];
  const waiters = new Set();
  let pending = Buffer.alloc(0);
  let closedResolve;
  const closed = new Promise((resolve) => {
    closedResolve = resolve;
  });
  let isClosed = false;

  const notify = () => {
    for (const w of waiters) w();
  };
  socket.on('data', (data) => {
    chunks.push(data);
    pending = Buffer.concat([pending, data]);
    while (pending.length >= 9) {
      const length = pending.readUIntBE(0, 3);
      if (pending.length < 9 + length) break;
      frames.push({
        at: performance.now(),
        length,
        type: pending.readUInt8(3),
        flags: pending.readUInt8(4),
        streamId: pending.readUInt32BE(5) & 0x7fffffff,
        payload: pending.subarray(9, 9 + length),
      });
      pending = pending.subarray(9 + length);
    }
    notify();
  });
  socket.on('error', () => {}); // a reset after GOAWAY is fine; `closed` reports the end
  socket.on('close', () => {
    isClosed = true;
    closedResolve();
    notify();
  });

  // Resolves with the first frame (in arrival order) matching `pred`; rejects
  // on timeout or when the connection closes first, listing what did arrive.
  function nextFrame(pred, { timeoutMs = 3000, what = 'frame' } = {}) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = frames.find(pred);
        if (found) return done(() => resolve(found));
        if (isClosed) return done(() => reject(new Error(`connection closed before ${what}; got: ${summary()}`)));
        return undefined;
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`no ${what} within ${timeoutMs} ms; got: ${summary()}`))),
        timeoutMs,
      );
      const done = (fn) => {
        clearTimeout(timer);
        waiters.delete(check);
        fn();
      };
      waiters.add(check);
      check();
    });
  }

  function summary() {
    const raw = Buffer.concat(chunks);
    if (frames.length === 0) {
      return raw.length ? `${raw.length} bytes: ${JSON.stringify(raw.subarray(0, 80).toString('latin1'))}` : 'nothing';
    }
    return frames.map(describeFrame).join('; ');
  }

  return {
    socket,
    frames,
    closed,
    isClosed: () => isClosed,
    received: () => Buffer.concat(chunks),
    write: (buf) => new Promise((resolve, reject) => socket.write(buf, (err) => (err ? reject(err) : resolve()))),
    nextFrame,
    summary,
    destroy: () => socket.destroy(),
  };
}
