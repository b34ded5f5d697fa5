"""Run at the start of every Python process of a local real-engine run (this folder is put first on
the run's PYTHONPATH, and Python imports `sitecustomize` at start): lets vLLM 0.22's CPU build
serve LoRA adapters on a machine without a CUDA driver.

vLLM 0.22's `async_tensor_h2d` pins host memory by default (vllm-project/vllm#41434) and its LoRA
index mapping (`vllm.lora.punica_wrapper.utils.convert_mapping`) calls it (#42347), even when the
device is the CPU, whose platform says pinning is unavailable (`CpuPlatform.
is_pin_memory_available`). With PyPI's torch (a CUDA build) and no driver, pinning fails and the
engine dies at start ("Found no NVIDIA driver on your system") as soon as LoRA is on. The module's
`async_tensor_h2d` is rebound, once vLLM imports it, to the same function without pinning, as
vllm-project/tpu-inference#2678 does for TPUs. A GPU replica never runs this: the cluster's
images do not carry this folder on their path.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

PATCHED_MODULE = "vllm.lora.punica_wrapper.utils"


class UnpinnedLoraMapping(importlib.abc.MetaPathFinder):
    """Finds PATCHED_MODULE as Python would, and rebinds its `async_tensor_h2d` once loaded."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != PATCHED_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        load = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            module.async_tensor_h2d = functools.partial(  # type: ignore[attr-defined]
                module.async_tensor_h2d, pin_memory=False
            )

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if not any(isinstance(finder, UnpinnedLoraMapping) for finder in sys.meta_path):
    sys.meta_path.insert(0, UnpinnedLoraMapping())
