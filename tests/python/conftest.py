"""Shared by the pytest files of `import xtrain` (ctest: python_pytest, with PYTHONPATH=build/python).

Models are written here in plain torch (a tiny MLP and a tiny GPT); references are torch.optim
hand loops. Every test is small: a few seconds on 2 cores."""
import copy
import os
import socket
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("XTRAIN_BINARY_DIR", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(1)  # the test machine is shared; results do not depend on it


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rel_diff(a, b):
    """||a - b|| / ||b|| over every tensor of two parameter lists."""
    num = sum(float((x.double() - y.double()).pow(2).sum()) for x, y in zip(a, b))
    den = sum(float(y.double().pow(2).sum()) for y in b)
    return (num / max(den, 1e-30)) ** 0.5


def clone_model(model):
    return copy.deepcopy(model)
