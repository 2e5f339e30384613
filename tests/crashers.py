"""Convolutions that misbehave the ways real kernels do, for the isolation tests
(tests/test_isolation.py): each is torch's conv2d except on the problems it is aimed at.
Importable as ``tests.crashers`` (a function a worker process can receive) and usable as a
``FILE.py:NAME`` backend. ``CRASHERS_OFF=1`` in the environment makes every one behave (a
kernel that was fixed), for ``--resume --retry-crashed``."""

import ctypes
import os
import signal
import sys
import time

import torch

_broken = False  # the sticky one: once tripped, every later call in this process fails


def _torch(input, weight, bias, stride, padding, dilation, groups):
    return torch.nn.functional.conv2d(input, weight, bias, stride, padding, dilation, groups)


def _on() -> bool:
    return not os.environ.get("CRASHERS_OFF")


def resnet_mixed(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """ResNet-50's layers at batch 1: segfaults on those with 64 input channels, aborts on those
    with 128, exits (os._exit(0)) on the one from 256 to 64 channels, hangs on the one from 512
    to 128 channels."""
    c, k = input.shape[1], weight.shape[0]
    if _on():
        if c == 64:
            ctypes.string_at(0)
        if c == 128:
            os.abort()
        if c == 256 and k == 64:
            os._exit(0)
        if c == 512 and k == 128:
            time.sleep(3600)
    return _torch(input, weight, bias, stride, padding, dilation, groups)


def calls_sys_exit(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """sys.exit(0) on inputs with 8 channels: a pass nobody could see through, if convcheck let it."""
    if _on() and input.shape[1] == 8:
        sys.exit(0)
    return _torch(input, weight, bias, stride, padding, dilation, groups)


def no_memory(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """MemoryError on inputs with 8 channels (an ordinary exception: an error record)."""
    if _on() and input.shape[1] == 8:
        raise MemoryError("cannot allocate the workspace")
    return _torch(input, weight, bias, stride, padding, dilation, groups)


def sticky(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """CUDA's sticky error, imitated: the first input with 8 channels trips it, and from then on
    every call in this process fails with the message CUDA gives after an illegal address."""
    global _broken
    if _on() and input.shape[1] == 8:
        _broken = True
    if _broken:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    return _torch(input, weight, bias, stride, padding, dilation, groups)


def hangs(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Never returns on inputs with 8 channels."""
    if _on() and input.shape[1] == 8:
        time.sleep(3600)
    return _torch(input, weight, bias, stride, padding, dilation, groups)


def hangs_with_a_detached_child(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Starts a process detached with setsid (out of its worker's process group), writes its pid to
    $CRASHERS_CHILD, and never returns."""
    import subprocess

    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    with open(os.environ["CRASHERS_CHILD"], "w") as f:
        f.write(str(child.pid))
    time.sleep(3600)


def plans_then_segfault(count: int, crash_at: int):
    """A task for the supervisor itself: announce ``count`` cuDNN-like plans in turn and
    segfault in plan ``crash_at`` (what an --all-engines check does when one engine crashes)."""
    from convcheck.base import stages

    stages.enter("build")
    for i in range(count):
        stages.enter("execute", f"plan{i}")
        if i == crash_at:
            ctypes.string_at(0)
    return count


def cuda_device_assert(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """On the GPU, a real sticky CUDA error on inputs with 8 channels: an out-of-range index
    trips a device-side assert in torch's indexing kernel, after which the process's CUDA
    context fails every later call ("device-side assert triggered")."""
    if _on() and input.shape[1] == 8 and input.is_cuda:
        table = torch.zeros(4, device=input.device)
        table[torch.tensor([1 << 20], device=input.device)].sum().item()
    return _torch(input, weight, bias, stride, padding, dilation, groups)


def kills_its_parent(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """SIGTERM to the process that started it, on two images: a kernel's test harness that ends its parent,
    and then waits to be ended with it (one that returns at once may answer first: see
    convcheck.campaign.workers._stand_between)."""
    if input.shape[0] == 2 and _on():
        os.kill(os.getppid(), signal.SIGTERM)
        time.sleep(60)
    return _torch(input, weight, bias, stride, padding, dilation, groups)


def forks(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Forks on odd batch sizes and returns in both processes, as a harness that forks to isolate a kernel and
    forgets to end its child: the child returns into whatever loop called the function."""
    if input.shape[0] % 2 and _on():
        os.fork()
    return _torch(input, weight, bias, stride, padding, dilation, groups)


def verdict_then_hangs(status: str):
    """A task that has its verdict (a record, as a check's before its diagnosis) and then hangs in the diagnose
    stage: what a diagnosis past the time limit looks like to the supervisor, whatever the machine's speed."""
    from convcheck.base import stages

    stages.enter("compare")
    stages.verdict(lambda: {"status": status, "outside": 3, "total": 9, "bound_ratio": 124.0, "message": ""})
    stages.enter("diagnose")
    time.sleep(600)


def chatty(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Writes to stdout and stderr for a few seconds, as a verbose kernel does: output its supervisor relays."""
    for i in range(30):
        print("working", i)
        sys.stderr.write("still working\n")
        time.sleep(0.1)
    return _torch(input, weight, bias, stride, padding, dilation, groups)
