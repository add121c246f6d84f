"""Freed tensor memory kept for reuse (rankstudy.malloc, set by python -m rankstudy)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from rankstudy.malloc import _glibc, keep_freed_memory

# A step that allocates and frees two 64 MiB tensors, ten times to settle the heap's free blocks, then ten times
# counted; prints the setting and the page faults of the counted steps.
REUSE = """
import resource, torch
from rankstudy.malloc import keep_freed_memory
setting = keep_freed_memory()
def step():
    doubled = torch.ones(2 ** 24) * 2  # [2^24] floats: 64 MiB each
    doubled.sum()
for _ in range(10):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(setting, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(malloc: str) -> tuple[str, int]:
    env = dict(os.environ, RANKSTUDY_MALLOC=malloc)
    setting, faults = subprocess.run([sys.executable, "-c", REUSE], env=env, check=True, capture_output=True,
                                     text=True).stdout.split()
    return setting, int(faults)


def test_the_opt_out_leaves_malloc_alone():
    assert keep_freed_memory({"RANKSTUDY_MALLOC": "system"}) == "system"


@pytest.mark.skipif(_glibc() is None, reason="the knobs are glibc's")
def test_a_freed_tensor_is_reused_without_faulting_its_pages_in_again():
    system, heap = _faults("system"), _faults("heap")
    assert system[0] == "system" and heap[0] == "heap"
    # glibc's default maps each of the 20 counted 64 MiB tensors afresh: 16,384 faults of 4 KiB pages each (fewer
    # with huge pages). With the setting the heap's blocks are reused; usually nothing faults, but on a busy VM
    # one block's pages were seen to fault in again once in the ten steps (16,384), so the bound is one tensor's.
    one_tensor = 2 ** 24 * 4 // resource.getpagesize()
    assert heap[1] <= one_tensor and system[1] > 10 * (heap[1] + 1)


# Three training steps of a TK model on 2 MB activations; prints a digest of the trained weights.
TRAIN = """
import hashlib, numpy, torch
from rankstudy.malloc import keep_freed_memory
from rankstudy.models import build_model
keep_freed_memory()
torch.manual_seed(0)
vectors = numpy.random.default_rng(0).standard_normal((500, 64), dtype=numpy.float32)
model = build_model("tk", {"layers": 1, "heads": 4, "ff_dim": 64}, vectors)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
query, documents = torch.randint(2, 500, (16, 6)), torch.randint(2, 500, (16, 500))
for _ in range(3):
    optimizer.zero_grad()
    scores = model(query, documents)
    torch.relu(1 - scores[:8] + scores[8:]).mean().backward()
    optimizer.step()
print(hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest())
"""


def test_the_setting_changes_no_number():
    digests = {subprocess.run([sys.executable, "-c", TRAIN], env=dict(os.environ, RANKSTUDY_MALLOC=malloc),
                              check=True, capture_output=True, text=True).stdout for malloc in ("system", "heap")}
    assert len(digests) == 1
