"""A calibration row: one published run's setup, metric and value, and the profile it is
planned as (vLLM's serving defaults of the version it names)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from serving.spec.profile import ModelSpec

# burst_tpot: the mean time per output token of a run that queued every request at once.
Metric = Literal["tpot", "burst_tpot", "ttft", "prefill", "output_tps", "total_tps"]
Part = Literal["fit", "held"]
# vLLM's engine: V0 before vLLM 0.8 (V1 opt-in there with VLLM_USE_V1=1), V1 the default from
# 0.8.0 and the only engine of 0.11 onward and of 0.22, which servestack deploys.
Engine = Literal["v0", "v1"]

# vLLM's serving defaults since 0.10 (engine/arg_utils.py): GPUs with >= 70 GiB that are not an
# A100 get max_num_seqs 1024 and max_num_batched_tokens 8192; others 256 and 2048.
VLLM_HOPPER = {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}
VLLM_AMPERE = {"max_num_seqs": 256, "max_num_batched_tokens": 2048}
# vLLM before 0.14 schedules synchronously unless a run passes --async-scheduling; from 0.14 on,
# async scheduling is on unless something rules it out (vllm/config/vllm.py, VllmConfig: an
# unset async_scheduling becomes True with the multiprocessing or single-process executor,
# False only for pooling models, some speculative decoding, or an executor without it, as vLLM
# 0.22's V1 Ray executor). A profile switches async scheduling with the Ray V2 executor
# (serving.catalog.fast_paths), which every row sets as its version ran.
SYNC = {"fast_paths": {"ray_v2_executor": False}}
ASYNC = {"fast_paths": {"ray_v2_executor": True}}


def planned(profile: dict[str, Any]) -> ModelSpec:
    """The profile a published run is planned as."""
    base = {"name": "measured", "source": "org/model", "max_model_len": 4096}
    return ModelSpec.model_validate(base | profile)


@dataclass(frozen=True)
class Row:
    source: str
    setup: str
    metric: Metric
    published: float  # ms for tpot/burst_tpot/ttft/prefill, tokens/s for *_tps
    profile: dict[str, Any]
    part: Part
    batch: int = field(default=1, kw_only=True)  # concurrency, for tpot and ttft
    # Per-request time the measured vLLM version spent before prefill that the version
    # servestack deploys no longer spends (see
    # calibration_sources.VLLM_0_11_QWEN3_TEMPLATE_PARSE_S);
    # added to the planner's TTFT for this row only.
    retired_frontend_s: float = field(default=0.0, kw_only=True)
    # The measured server's serial work per chat request (its API server's event loop), which
    # requests arriving together queue behind (see calibration_sources.FRONTEND_RUNS).
    serial_frontend_s: float = field(default=0.0, kw_only=True)
    # Every prompt of the run has the workload's length (a synthetic benchmark's), not a chat
    # dataset's spread around it (serving.plan.speed.prompt_lengths).
    fixed_prompts: bool = field(default=False, kw_only=True)
    # The run kept `batch` requests going, sending the next as each ended (`vllm bench serve
    # --max-concurrency`): new prompts' prefill shares the decode steps
    # (serving.plan.speed.mixed.loaded_step_s). `vllm bench latency`'s fixed batch does not.
    closed_loop: bool = field(default=False, kw_only=True)
    # The engine the measured vLLM ran, from the version its source states: a V0 run's steps
    # also pay V0's host time beyond V1's (calibration_score.v0_host_time,
    # fitted.V0_STEP_OVERHEAD_S), which the planner of V1 servers never adds.
    engine: Engine = field(default="v1", kw_only=True)

    def spec(self) -> ModelSpec:
        profile = self.profile
        cap = self.output_cap
        if cap is not None and "max_output_tokens" not in profile["workload"]:
            profile = profile | {"workload": profile["workload"] | {"max_output_tokens": cap}}
        return planned(profile)

    @property
    def output_cap(self) -> int | None:
        """The cap on every output of a run on `vllm bench serve`'s random dataset ('random
        2,000 in / 100 out'): each request asks for exactly --random-output-len tokens as its
        max_tokens (vllm/benchmarks/datasets.py, RandomDataset.sample, range ratio 0 by default),
        and ends there unless the model ends it first. GPUStack's totals show most reach it
        (50,000 of 500 x 100 for Qwen3-14B); a row's output length is the published mean."""
        found = re.search(r"random ([\d,]+) in / ([\d,]+) out", self.setup)
        return int(found.group(2).replace(",", "")) if found else None

    @property
    def prompts(self) -> int | None:
        """Requests a run sent, as its setup states them ('500 prompts'): queued at once for a
        saturation run, in a closed loop at the row's concurrency for a latency run."""
        found = re.search(r"([\d,]+) prompts", self.setup)
        return int(found.group(1).replace(",", "")) if found else None

    @property
    def klass(self) -> str:
        if self.metric in ("ttft", "prefill"):
            return "ttft"
        if self.metric in ("output_tps", "total_tps"):
            return "saturation"
        return "moe decode" if self.spec().architecture.is_moe else "dense decode"

    @property
    def gpu(self) -> str:
        return str(self.profile["accelerator"])

    @property
    def label(self) -> str:
        arch = self.profile["architecture"]
        name = arch if isinstance(arch, str) else arch["key"]
        layout = self.profile.get("parallelism", {})
        work = self.profile["workload"]
        lengths = f"{work['input_tokens']}/{work['output_tokens']}"
        dtype = " fp8" if self.profile.get("quantization") == "fp8" else ""
        expert = "+ep" if layout.get("expert") else ""
        return (
            f"{name}{dtype} {self.gpu} tp{layout.get('tensor', 1)}{expert} {lengths} "
            f"{self.metric} c{self.batch}"
        )


# `vllm bench serve --dataset-name random --random-input-len 128 --random-output-len 4`
SHORT_PROMPT = (128, 4)


@dataclass(frozen=True)
class FrontendRun:
    """A published short-prompt run (1,000 random prompts of 128 in / 4 out, sent at once):
    so little GPU work that, where the planner puts that work under half the run (checked by
    test_published_measurements), the run is paced by the server's serial work per request."""

    source: str
    profile: dict[str, Any]
    total_tps: float
    prompts: int = 1000

    def spec(self) -> ModelSpec:
        return planned(self.profile)

    @property
    def serial_s(self) -> float:
        """The run's duration per request."""
        return sum(SHORT_PROMPT) / self.total_tps


def _p(
    arch: str | dict[str, Any],
    accelerator: str,
    tensor: int = 1,
    workload: tuple[int, int] = (1024, 256),
    **extra: Any,
) -> dict[str, Any]:
    return (
        {
            "architecture": arch,
            "accelerator": accelerator,
            "parallelism": {"tensor": tensor},
            "workload": {"input_tokens": workload[0], "output_tokens": workload[1]},
        }
        | SYNC
        | extra
    )
