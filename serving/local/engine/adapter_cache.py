"""A simulated worker's LoRA adapters: which it holds, which a batch may mix, and how many it
loaded. Kept apart from the step loop (`serving.local.engine.simulation`) that asks it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable


class AdapterCache:
    """A worker's LoRA adapters, as vLLM 0.22 keeps them: at most `gpu_slots` distinct adapters
    among the sequences a step runs (`max_loras`: the check in `vllm/v1/core/sched/
    scheduler.py`'s waiting loop), and `cpu_slots` loaded (`max_cpu_loras`), the least recently
    used evicted when another is loaded (`vllm/lora/worker_manager.py`,
    `LRUCacheWorkerLoRAManager.add_adapter`). `loads` counts the loads from storage."""

    def __init__(self, gpu_slots: int, cpu_slots: int) -> None:
        if gpu_slots < 1:
            raise ValueError(f"max_loras must be at least 1, got {gpu_slots}")
        self.gpu_slots = gpu_slots
        self.cpu_slots = max(cpu_slots, gpu_slots)
        self._loaded: OrderedDict[str, None] = OrderedDict()
        self.loads = 0
        # Told of each load (the engine's metrics count them).
        self.on_load: Callable[[str], None] | None = None

    def loaded(self) -> list[str]:
        """The adapters the worker holds, least recently used first."""
        return list(self._loaded)

    def apply(self, adapters: Iterable[str]) -> int:
        """A step's adapters made ready, as the worker does before its forward pass: each one
        not loaded is loaded (evicting the least recently used beyond `cpu_slots`), each one
        touched. Returns how many were loaded."""
        loads = 0
        for adapter in dict.fromkeys(adapters):
            if adapter in self._loaded:
                self._loaded.move_to_end(adapter)
                continue
            if len(self._loaded) + 1 > self.cpu_slots:
                self._loaded.popitem(last=False)
            self._loaded[adapter] = None
            loads += 1
            if self.on_load is not None:
                self.on_load(adapter)
        self.loads += loads
        return loads
