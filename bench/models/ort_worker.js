#!/usr/bin/env node
// ONNX Runtime side of the model benchmark (bench/models/bench.py drives it).
//
//   node ort_worker.js ORT_MODULE_DIR THREADS
//
// A long-lived worker so that the driver can interleave it with the other
// frameworks run by run. It reads one JSON command per line on stdin and
// answers one JSON line on stdout:
//   {"cmd":"load","id":ID,"model":PATH.onnx,"inputs":{NAME:PATH.npy},"out":PATH.npy}
//       creates the session (CPU EP, THREADS intra-op threads, 1 inter-op,
//       sequential, all graph optimizations), runs 3 warm-up runs and writes
//       the first output to "out" so the driver can check that every
//       framework computes the same thing.
//   {"cmd":"time","id":ID,"warmup":W,"runs":K,"max_s":S}
//       W untimed runs, then K timed runs of `await session.run()` (fewer if
//       S seconds pass, but at least 3); answers {"times_ms":[...]}.
//   {"cmd":"info"}  answers the onnxruntime-node version.
// Errors answer {"ok":false,"error":"..."} and the worker carries on.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

const [modDir, threadArg] = process.argv.slice(2);
if (!modDir || !threadArg) {
  process.stderr.write('usage: node ort_worker.js ORT_MODULE_DIR THREADS\n');
  process.exit(2);
}
const threads = parseInt(threadArg, 10);
const ort = require(modDir);
const ortVersion = JSON.parse(fs.readFileSync(path.join(modDir, 'package.json'), 'utf8')).version;

// --- .npy (format 1.0/2.0, little-endian, C order, <f4 / <i8) -------------
const DTYPES = { '<f4': ['float32', Float32Array, 4], '<i8': ['int64', BigInt64Array, 8] };

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY')
    throw new Error(`${file}: not a .npy file (bad magic)`);
  const major = buf[6];
  let hlen, hstart;
  if (major === 1) { hlen = buf.readUInt16LE(8); hstart = 10; }
  else if (major === 2 || major === 3) { hlen = buf.readUInt32LE(8); hstart = 12; }
  else throw new Error(`${file}: unsupported .npy version ${major}`);
  if (hstart + hlen > buf.length) throw new Error(`${file}: header runs past the end of the file`);
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr':\s*'([^']*)'/.exec(header);
  const order = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !order || !shape) throw new Error(`${file}: malformed header ${JSON.stringify(header)}`);
  if (order[1] !== 'False') throw new Error(`${file}: Fortran order is not supported`);
  const dt = DTYPES[descr[1]];
  if (!dt) throw new Error(`${file}: dtype ${descr[1]} is not supported (only <f4, <i8)`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map((s) => {
    if (!/^\d+$/.test(s)) throw new Error(`${file}: bad dimension '${s}'`);
    return Number(s);
  });
  const count = dims.reduce((a, b) => a * b, 1);
  const off = hstart + hlen;
  if (!Number.isSafeInteger(count * dt[2]) || buf.length - off !== count * dt[2])
    throw new Error(`${file}: ${buf.length - off} data bytes, shape [${dims}] needs ${count * dt[2]}`);
  // Copy into an aligned buffer: the file's data offset need not be aligned.
  const data = new dt[1](count);
  Buffer.from(data.buffer).set(buf.subarray(off));
  return new ort.Tensor(dt[0], data, dims);
}

function writeNpy(file, tensor) {
  let descr, bytes;
  if (tensor.type === 'float32') descr = '<f4';
  else if (tensor.type === 'int64') descr = '<i8';
  else throw new Error(`output type ${tensor.type} cannot be written`);
  bytes = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  const dims = Array.from(tensor.dims);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), bytes]));
}

// --- commands ---------------------------------------------------------------
const loaded = new Map(); // id -> {session, feeds}
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

async function load(c) {
  const session = await ort.InferenceSession.create(c.model, {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const [name, file] of Object.entries(c.inputs)) feeds[name] = readNpy(file);
  let out;
  for (let i = 0; i < 3; i++) out = await session.run(feeds);
  if (c.out) writeNpy(c.out, out[session.outputNames[0]]);
  loaded.set(c.id, { session, feeds });
  return {};
}

async function time(c) {
  const m = loaded.get(c.id);
  if (!m) throw new Error(`config '${c.id}' is not loaded`);
  for (let i = 0; i < c.warmup; i++) await m.session.run(m.feeds);
  const ts = [];
  const t0 = nowMs();
  while (ts.length < c.runs && (ts.length < 3 || nowMs() - t0 < c.max_s * 1000)) {
    const s = nowMs();
    await m.session.run(m.feeds);
    ts.push(nowMs() - s);
  }
  return { times_ms: ts };
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let reply;
    try {
      const c = JSON.parse(line);
      if (c.cmd === 'load') reply = await load(c);
      else if (c.cmd === 'time') reply = await time(c);
      else if (c.cmd === 'info') reply = { version: ortVersion, threads };
      else throw new Error(`unknown command '${c.cmd}'`);
      reply.ok = true;
    } catch (e) {
      reply = { ok: false, error: String(e && e.message ? e.message : e).replace(/\s+/g, ' ') };
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  }
}
main().catch((e) => { process.stderr.write(`ort_worker: ${e}\n`); process.exit(1); });
