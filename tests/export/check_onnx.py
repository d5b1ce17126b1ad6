#!/usr/bin/env python3
"""Checks an exported ONNX file with python3-onnx (1.12): onnx.checker.check_model(full_check=True),
which also runs strict shape inference; prints the IR version and opset. Run with /usr/bin/python3."""
import sys

import onnx


def main(path):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    print(f"ok ir_version={model.ir_version} opset={opset[0] if opset else '?'} nodes={len(model.graph.node)}")


if __name__ == "__main__":
    main(sys.argv[1])
