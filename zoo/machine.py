"""The machine a number came from and the one a run would train on: the CPU's model and instruction set, the
device (the one a run trains on, and its name), and whether bf16 is fast here. Training, experiments, the report
and the bench all ask it, so it imports nothing from zoo but zoo.errors."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import TYPE_CHECKING

from zoo.errors import RunError

if TYPE_CHECKING:
    import torch


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_has_bf16_matmul() -> bool | None:
    """Whether PyTorch's CPU matmuls run bfloat16 through oneDNN here: PyTorch's own test, true with AVX-512 (BW, VL,
    DQ), AVX-NE-CONVERT or Arm's BF16 extension. Without them bf16 matmuls take a slow fallback: on a 2-core AVX2
    EPYC a training step of the 7.6M-parameter scale model under bf16 autocast took 20 to 35 times as long as in
    fp32, 93% of it in aten::mm (docs/measurements/cpu-avx2-2026-11-28). None where this PyTorch cannot say."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return None


def cpu_capability() -> str:
    """The instruction set PyTorch's CPU kernels use here ('AVX2', 'AVX512'): with the CPU model and the torch
    version, what decides a CPU run's floats and its speed."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def cpu_hardware(capability: str | None = None) -> str:
    """'cpu (AVX2)': the CPU as a place runs train, this machine's unless a record's provenance.cpu_capability is
    given."""
    return f"cpu ({capability or cpu_capability()})"


def select_device(name: str) -> torch.device:
    """The device a run whose train.device is `name` trains on ('auto': a GPU if PyTorch sees one); RunError for
    'cuda' where there is none."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RunError("device: 'cuda' asked for, but PyTorch sees no CUDA device; allowed here: 'auto' or 'cpu'")
    return torch.device(name)


def describe_device(device: torch.device) -> str:
    """'cpu', or 'cuda (NVIDIA H100 80GB HBM3)': a report names the hardware its runs trained on."""
    import torch

    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return str(device)


def device_type_here(device: str) -> str:
    """'cpu' or 'cuda': where a run whose train.device is `device` trains on this machine ('auto': a GPU if PyTorch
    sees one). A dry-run may ask about 'cuda' on a machine without one: the answer is still 'cuda'."""
    return select_device("auto").type if device == "auto" else device


def hardware_here(device: str) -> str | None:
    """The hardware a run whose train.device is `device` trains on here: 'cpu (AVX2)', 'cuda (NVIDIA H200)'; None
    where there is none to name (a GPU asked for on a machine without one: the run fails on its own)."""
    import torch

    kind = device_type_here(device)
    if kind == "cpu":
        return cpu_hardware()
    return describe_device(torch.device(kind)) if torch.cuda.is_available() else None


def bf16_warning(runs: str) -> str | None:
    """A warning where `runs` ('this run trains', '37 runs of scale train') in bf16 on this CPU, and its bf16 matmuls
    take PyTorch's slow fallback; None otherwise."""
    if cpu_has_bf16_matmul() is not False:
        return None
    return (f"{runs} in bf16 on this CPU ({cpu_model()}, {cpu_capability()}), where PyTorch's bf16 matmuls "
            "take a slow fallback (it needs AVX-512 or AVX-NE-CONVERT): a step can take tens of times as long as in "
            "fp32 (`zoo bench` measures both here). A CPU with those instructions, or a GPU, runs bf16 at full "
            "speed; changing the precision would change what is measured.")
