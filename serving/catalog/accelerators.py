"""The GPU catalog: every fact servestack uses about an accelerator, with where it was published.

Memory is what `nvidia-smi` reports as total for the board, not the marketing figure. vLLM's
`gpu_memory_utilization` is a fraction of the total CUDA reports, 0.5-0.7 GiB less (driver
reservations); the planner's runtime overhead covers the difference. Throughput figures are
dense (no 2:4 sparsity), for the SXM boards GCP attaches.
"""

from __future__ import annotations

from pydantic import Field

from serving.frozen import Frozen

MIB = 1024**2
TB = 10**12
GB = 10**9


class Accelerator(Frozen):
    """One GPU model as the planner sees it."""

    key: str = Field(description="Catalog key used in model profiles, e.g. 'h100-80gb'.")
    display_name: str = Field(description="Human-readable name.")
    product_name: str = Field(
        description="The name nvidia-smi and NVIDIA's DCGM exporter report (its modelName label)."
    )
    ray_accelerator_type: str = Field(
        description="Ray's accelerator_type name (ray.util.accelerators), e.g. 'H100'. Ray "
        "detects both A100s as 'A100'; the A100-40G/-80G names must be declared as node "
        "resources by whoever starts the Ray node."
    )
    memory_bytes: int = Field(description="Total device memory as nvidia-smi reports it.")
    hbm_bandwidth_bytes_per_s: float = Field(description="Peak HBM bandwidth.")
    bf16_dense_flops: float = Field(description="Peak dense BF16 tensor-core FLOP/s.")
    fp8_dense_flops: float | None = Field(
        description="Peak dense FP8 tensor-core FLOP/s; None where the GPU has no FP8 math."
    )
    nvlink_bandwidth_bytes_per_s: float = Field(
        description="NVLink bandwidth per GPU, one direction (half the bidirectional figure)."
    )
    compute_capability: tuple[int, int] = Field(description="CUDA compute capability.")
    fp4_dense_flops: float | None = Field(
        default=None,
        description="Peak dense FP4 tensor-core FLOP/s (Blackwell); None where the GPU has no "
        "FP4 math. Listed, not planned: no profile quantizes to FP4 (serving.catalog.fp4 says "
        "what vLLM 0.22 runs in FP4 on which GPU).",
    )

    @property
    def has_fp8_math(self) -> bool:
        """FP8 tensor cores arrived with compute capability 8.9 (Ada) and 9.0 (Hopper)."""
        return self.fp8_dense_flops is not None and self.compute_capability >= (8, 9)


ACCELERATORS: dict[str, Accelerator] = {
    accelerator.key: accelerator
    for accelerator in (
        # NVIDIA H100 Tensor Core GPU datasheet (SXM5): 80 GB HBM3 at 3.35 TB/s, 989 TFLOP/s
        # dense BF16, 1,979 TFLOP/s dense FP8, NVLink 900 GB/s bidirectional.
        # https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
        # nvidia-smi on GCP a3-highgpu: 81,559 MiB total.
        Accelerator(
            key="h100-80gb",
            display_name="NVIDIA H100 80GB SXM",
            product_name="NVIDIA H100 80GB HBM3",
            ray_accelerator_type="H100",
            memory_bytes=81_559 * MIB,
            hbm_bandwidth_bytes_per_s=3.35 * TB,
            bf16_dense_flops=989e12,
            fp8_dense_flops=1_979e12,
            nvlink_bandwidth_bytes_per_s=450 * GB,
            compute_capability=(9, 0),
        ),
        # NVIDIA H200 datasheet (SXM): 141 GB HBM3e at 4.8 TB/s, same tensor cores as H100
        # (989 / 1,979 TFLOP/s dense BF16 / FP8), NVLink 900 GB/s bidirectional.
        # https://www.nvidia.com/en-us/data-center/h200/ ; nvidia-smi: 143,771 MiB total.
        Accelerator(
            key="h200-141gb",
            display_name="NVIDIA H200 141GB SXM",
            product_name="NVIDIA H200",
            ray_accelerator_type="H200",
            memory_bytes=143_771 * MIB,
            hbm_bandwidth_bytes_per_s=4.8 * TB,
            bf16_dense_flops=989e12,
            fp8_dense_flops=1_979e12,
            nvlink_bandwidth_bytes_per_s=450 * GB,
            compute_capability=(9, 0),
        ),
        # NVIDIA B200 as HGX B200 boards carry it (1,000 W), the GPU of GCP's A4: HBM3e at 8 TB/s,
        # dense 2,250 TFLOP/s BF16, 4,500 FP8, 9,000 FP4 (twice that with 2:4 sparsity), NVLink 5
        # at 1.8 TB/s bidirectional per GPU, compute capability 10.0 (sm_100). NVIDIA's HGX B200
        # table as quoted by https://glennklockwood.com/garden/processors/B200 and by Vultr's
        # B200 page https://docs.vultr.com/inference-cookbook/cuda/getting-started/hardware-overview
        # (both read 2026-12-03). Memory: Vultr's nvidia-smi on HGX B200 shows 179 GB; GCP's
        # machine catalog lists 184,320 MiB (180 GiB) for the B200 of a4-highgpu-8g (SkyPilot's
        # catalogs/v8/gcp/vms.csv at 8427bbff). Planned at Vultr's 179 GiB (183,296 MiB), the lower
        # of the two: the nvidia-smi total to the MiB was not found in a source read here.
        Accelerator(
            key="b200-180gb",
            display_name="NVIDIA B200 180GB SXM",
            product_name="NVIDIA B200",
            ray_accelerator_type="B200",
            memory_bytes=179 * 1024 * MIB,
            hbm_bandwidth_bytes_per_s=8.0 * TB,
            bf16_dense_flops=2_250e12,
            fp8_dense_flops=4_500e12,
            fp4_dense_flops=9_000e12,
            nvlink_bandwidth_bytes_per_s=900 * GB,
            compute_capability=(10, 0),
        ),
        # NVIDIA A100 datasheet (SXM4 80GB): HBM2e at 2,039 GB/s, 312 TFLOP/s dense BF16,
        # no FP8 tensor cores, NVLink 600 GB/s bidirectional.
        # https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
        # nvidia-smi: 81,920 MiB total.
        Accelerator(
            key="a100-80gb",
            display_name="NVIDIA A100 80GB SXM",
            product_name="NVIDIA A100-SXM4-80GB",
            ray_accelerator_type="A100-80G",
            memory_bytes=81_920 * MIB,
            hbm_bandwidth_bytes_per_s=2.039 * TB,
            bf16_dense_flops=312e12,
            fp8_dense_flops=None,
            nvlink_bandwidth_bytes_per_s=300 * GB,
            compute_capability=(8, 0),
        ),
        # Same datasheet (SXM4 40GB): HBM2 at 1,555 GB/s, 312 TFLOP/s dense BF16, NVLink
        # 600 GB/s bidirectional. nvidia-smi: 40,960 MiB total.
        Accelerator(
            key="a100-40gb",
            display_name="NVIDIA A100 40GB SXM",
            product_name="NVIDIA A100-SXM4-40GB",
            ray_accelerator_type="A100-40G",
            memory_bytes=40_960 * MIB,
            hbm_bandwidth_bytes_per_s=1.555 * TB,
            bf16_dense_flops=312e12,
            fp8_dense_flops=None,
            nvlink_bandwidth_bytes_per_s=300 * GB,
            compute_capability=(8, 0),
        ),
    )
}

# The GPUs a fix can send FP8 to, read from the catalog so a GPU added to it is offered too.
FP8_ACCELERATORS: tuple[str, ...] = tuple(
    key for key, accelerator in ACCELERATORS.items() if accelerator.has_fp8_math
)
