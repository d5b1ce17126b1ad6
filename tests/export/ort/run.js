// Runs an ONNX model with ONNX Runtime (onnxruntime-node, CPU) for xtrain's tests and benchmarks.
// Usage: node run.js spec.json. The spec names the model, one input (raw little-endian file, dtype
// float32 or int64, dims), the output file to write (raw float32), the threads, how many timed
// runs to make and optionally the graph optimisation level ("all" by default; "disabled" runs the
// QDQ graph as written); stdout gets one JSON line: {"dims": [...], "latency_ms": median, "runs": n}.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

async function main() {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const session = await ort.InferenceSession.create(spec.model, {
    intraOpNumThreads: spec.threads || 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: spec.optimization || 'all',
  });
  const raw = fs.readFileSync(spec.input.file);
  const buf = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength);
  const data = spec.input.dtype === 'int64' ? new BigInt64Array(buf) : new Float32Array(buf);
  const feeds = {[spec.input.name]: new ort.Tensor(spec.input.dtype, data, spec.input.dims)};
  let out = await session.run(feeds);  // also the warm-up
  const times = [];
  for (let i = 0; i < (spec.repeats || 0); ++i) {
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const y = out[spec.output.name];
  fs.writeFileSync(spec.output.file, Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
  times.sort((a, b) => a - b);
  const median = times.length ? times[Math.floor(times.length / 2)] : null;
  console.log(JSON.stringify({dims: y.dims, latency_ms: median, runs: times.length}));
}

main().catch((e) => {
  console.error('ort: ' + (e && e.message ? e.message : e));
  process.exit(1);
});
