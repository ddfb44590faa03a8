"""A fake `nvidia-smi` for the Python tests: test/fixtures/nvidia-smi/fake_nvidia_smi.py behind a wrapper on PATH.

Its answers are nvidia-smi's output WRITTEN in the format NVIDIA documents, not recorded (no GPU here:
test/fixtures/nvidia-smi/README.md)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "..", "fixtures", "nvidia-smi", "fake_nvidia_smi.py")


def set_state(state_file, state):
    with open(state_file + ".tmp", "w") as f:
        json.dump(state, f)
    os.rename(state_file + ".tmp", state_file)


def fake_smi(folder, state):
    """`nvidia-smi` in `folder`, answering as `state` says (rewrite it with set_state); returns (path, state file)."""
    state_file = os.path.join(folder, "state.json")
    set_state(state_file, state)
    smi = os.path.join(folder, "nvidia-smi")
    with open(smi, "w") as f:
        f.write('#!/bin/sh\nexec %s %s --kg-state %s "$@"\n' % (sys.executable, FAKE, state_file))
    os.chmod(smi, 0o755)
    return smi, state_file
