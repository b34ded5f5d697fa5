"""B200 (A4, a4-highgpu-8g) in the catalogs, planned like the others: its FP8 math and HBM feed
the speed model, its node is one NVLink domain of 8, GCP sells it by Spot, flex-start or
reservation but not on demand, and vLLM 0.22's FP4 paths are what the installed source says."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import vllm
from planner_support import spec

from serving import catalog
from serving.catalog.fp4 import FP4_LOADS_FROM, FP4_MATH_FROM, fp4_path
from serving.plan.planner import plan
from serving.plan.speed import ATTENTION_MFU, PREFILL_MFU
from serving.plan.speed.roofline import math_flops

A4 = catalog.MACHINE_TYPES["a4-highgpu-8g"]
B200 = catalog.ACCELERATORS["b200-180gb"]
VLLM = Path(inspect.getfile(vllm)).parent


def fp8_70b(accelerator: str, machine: str, tensor: int = 1) -> object:
    return spec(
        architecture="llama-3.3-70b", accelerator=accelerator, machine_type=machine,
        quantization="fp8", kv_cache_dtype="fp8", parallelism={"tensor": tensor},
        max_model_len=32768,
    )  # fmt: skip


class TestTheMachine:
    def test_one_node_is_one_nvlink_domain_of_eight_b200s(self) -> None:
        assert (A4.accelerator, A4.gpus_per_node, A4.gke_accelerator) == (
            "b200-180gb", 8, "nvidia-b200"
        )  # fmt: skip
        assert A4.expert_parallel_across_nodes and A4.gpu_network == "rdma"

    def test_it_is_sold_by_spot_flex_start_or_reservation_not_on_demand(self) -> None:
        assert A4.on_demand is False
        assert A4.price_for("spot") == A4.spot_price_per_hour_usd
        assert A4.price_for("spot") < A4.list_price()
        # No flex-start price was found: none is made up.
        assert A4.price_for("flex_start") is None

    def test_it_is_stocked_where_the_h200_example_stack_lives(self) -> None:
        assert "us-central1-b" in catalog.zones_offering(A4.gke_accelerator, "us-central1")

    def test_a_pod_gets_the_node_less_kubelet_reservations_and_daemonsets(self) -> None:
        room = catalog.pod_capacity(A4.name)
        node = catalog.kubelet_allocatable(A4.vcpus, A4.memory_bytes)
        assert 0 < room.cpus < node.cpus < A4.vcpus
        assert 0 < room.memory_bytes < node.memory_bytes < A4.memory_bytes


class TestPricesPerMode:
    """`servestack:prices` overrides a mode with `<type>:<mode>`, the list rate with `<type>`."""

    def test_a_reservation_bills_at_the_list_rate_or_the_stacks(self) -> None:
        h100 = catalog.MACHINE_TYPES["a3-highgpu-8g"]
        assert h100.price_for("reservation") == h100.price_per_hour_usd
        assert h100.price_for("reservation", {"a3-highgpu-8g": 61.5}) == 61.5
        assert h100.price_for("reservation", {"a3-highgpu-8g:reservation": 40.0}) == 40.0

    def test_a_plain_override_leaves_spot_alone(self) -> None:
        h100 = catalog.MACHINE_TYPES["a3-highgpu-8g"]
        assert h100.price_for("spot", {"a3-highgpu-8g": 61.5}) == h100.spot_price_per_hour_usd
        assert h100.price_for("spot", {"a3-highgpu-8g:spot": 20.0}) == 20.0
        assert h100.price_for("flex_start", {"a3-highgpu-8g:flex_start": 30.0}) == 30.0

    @pytest.mark.parametrize("name", sorted(catalog.MACHINE_TYPES))
    def test_spot_is_cheaper_than_the_list_rate(self, name: str) -> None:
        machine = catalog.MACHINE_TYPES[name]
        assert machine.spot_price_per_hour_usd is not None
        assert machine.spot_price_per_hour_usd < machine.price_per_hour_usd


class TestTheSpeedModelPlansOnIt:
    def test_fp8_weights_run_at_b200s_fp8_rate(self) -> None:
        assert math_flops(fp8_70b("b200-180gb", "a4-highgpu-8g")) == B200.fp8_dense_flops

    def test_decode_follows_the_hbm_bandwidth(self) -> None:
        """Batch-1 decode of a 70B streams its weights: B200's 8 TB/s against H200's 4.8."""
        b200 = plan(fp8_70b("b200-180gb", "a4-highgpu-8g"))
        h200 = plan(fp8_70b("h200-141gb", "a3-ultragpu-8g"))
        assert b200.ok and h200.ok
        ratio = b200.itl_s / h200.itl_s
        bandwidth = catalog.ACCELERATORS["h200-141gb"].hbm_bandwidth_bytes_per_s / (
            B200.hbm_bandwidth_bytes_per_s
        )
        assert bandwidth < ratio < 1

    def test_its_larger_memory_holds_more_kv_cache(self) -> None:
        b200 = plan(fp8_70b("b200-180gb", "a4-highgpu-8g")).groups[0].memory
        h200 = plan(fp8_70b("h200-141gb", "a3-ultragpu-8g")).groups[0].memory
        assert b200.kv_capacity_tokens > h200.kv_capacity_tokens

    def test_blackwell_borrows_hoppers_fitted_shares_and_says_so(self) -> None:
        generation = B200.compute_capability[0]
        assert PREFILL_MFU[generation] == PREFILL_MFU[9]
        assert ATTENTION_MFU[generation] == ATTENTION_MFU[9]
        # no published run measured a B200: its plan says its error band does not cover it
        assert "Blackwell GPUs" in plan(fp8_70b("b200-180gb", "a4-highgpu-8g")).beyond_measured
        assert "Blackwell GPUs" not in plan(fp8_70b("h200-141gb", "a3-ultragpu-8g")).beyond_measured


class TestFp4AsVllm022RunsIt:
    def test_fp4_math_only_on_blackwell(self) -> None:
        assert fp4_path(B200, "nvfp4") == fp4_path(B200, "mxfp4") == "fp4-math"
        for key in ("h100-80gb", "h200-141gb", "a100-80gb"):
            assert fp4_path(catalog.ACCELERATORS[key], "nvfp4") == "weight-only"

    def test_the_thresholds_are_the_installed_vllms(self) -> None:
        from vllm.model_executor.layers.quantization.modelopt import ModelOptNvFp4Config
        from vllm.model_executor.layers.quantization.mxfp4 import Mxfp4Config

        def major_minor(capability: int) -> tuple[int, int]:
            return divmod(capability, 10)

        assert major_minor(ModelOptNvFp4Config.get_min_capability()) == FP4_LOADS_FROM["nvfp4"]
        assert major_minor(Mxfp4Config.get_min_capability()) == FP4_LOADS_FROM["mxfp4"]
        native = (VLLM / "model_executor/kernels/linear/nvfp4/flashinfer.py").read_text()
        assert "has_device_capability(100)" in native
        assert FP4_MATH_FROM["nvfp4"] == major_minor(100)
        oracle = (VLLM / "model_executor/layers/fused_moe/oracle/mxfp4.py").read_text()
        assert "SM100+ prefers DeepGEMM FP4" in oracle
        assert FP4_MATH_FROM["mxfp4"] == major_minor(100)
