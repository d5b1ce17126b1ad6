#!/usr/bin/env python3
"""Independent checker for TensorBoard event files (tests/monitor/tensorboard_test.cpp).

Framing: each record is uint64 length | masked crc32c(length) | payload | masked crc32c(payload),
little-endian; CRCs are checked with python3-crc32c. Payloads are decoded as Event messages with
code that protoc generates at run time from the committed tfevents.proto (python3-protobuf).
Prints JSON: {"ok": true, "events": [...]} or {"ok": false, "error": ..., "valid_records": n}
(exit status 1) for a truncated or corrupted file."""
import importlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import crc32c


def masked(data):
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def load_proto_module(tmp):
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["protoc", f"-I{here}", f"--python_out={tmp}", os.path.join(here, "tfevents.proto")], check=True)
    sys.path.insert(0, tmp)
    return importlib.import_module("tfevents_pb2")


def records(blob):
    """Yields payloads; raises ValueError naming the offset of the first bad record."""
    pos = 0
    while pos < len(blob):
        if len(blob) - pos < 12:
            raise ValueError(f"truncated record header at offset {pos}")
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if masked(header) != length_crc:
            raise ValueError(f"length crc mismatch at offset {pos}")
        if len(blob) - pos - 12 < length + 4:
            raise ValueError(f"truncated record payload at offset {pos}")
        payload = blob[pos + 12:pos + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[pos + 12 + length:pos + 16 + length])
        if masked(payload) != data_crc:
            raise ValueError(f"payload crc mismatch at offset {pos}")
        yield payload
        pos += 16 + length


def describe_value(v):
    out = {"tag": v.tag}
    kind = v.WhichOneof("value")
    if kind == "simple_value":
        out["simple_value"] = v.simple_value
    elif kind == "histo":
        h = v.histo
        out["histo"] = {"min": h.min, "max": h.max, "num": h.num, "sum": h.sum, "sum_squares": h.sum_squares,
                        "bucket_limit": list(h.bucket_limit), "bucket": list(h.bucket)}
    elif kind == "tensor":
        t = v.tensor
        out["tensor"] = {"dtype": t.dtype, "dims": [d.size for d in t.tensor_shape.dim],
                         "string_val": [s.decode("utf-8") for s in t.string_val]}
    out["plugin_name"] = v.metadata.plugin_data.plugin_name
    return out


def main():
    with tempfile.TemporaryDirectory() as tmp:
        pb = load_proto_module(tmp)
        blob = open(sys.argv[1], "rb").read()
        events = []
        try:
            for payload in records(blob):
                e = pb.Event()
                e.ParseFromString(payload)
                d = {"wall_time": e.wall_time, "step": e.step}
                if e.WhichOneof("what") == "file_version":
                    d["file_version"] = e.file_version
                else:
                    d["values"] = [describe_value(v) for v in e.summary.value]
                events.append(d)
        except ValueError as err:
            print(json.dumps({"ok": False, "error": str(err), "valid_records": len(events)}))
            return 1
        print(json.dumps({"ok": True, "events": events}))
        return 0


if __name__ == "__main__":
    sys.exit(main())
