"""A local run's replicas stop without Ray's 30 s wait for external load balancers; a fault run's
keep it. Checked where it matters: the value Ray's own constants read in a process started with
the run's environment (no Ray is started)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from compiled_support import compile_spec
from repo import REPO

from serving.local.runtime.local_ray import LOCAL_DRAIN_S, run_env
from serving.local.runtime.ports import RunPorts
from serving.spec.loading import load_profile

LLAMA = REPO / "stacks/models/llama-3.1-8b.yaml"
PROBE = (
    "from ray.serve._private import constants as c; "
    "print(c.RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S)"
)


def _draining_period_ray_reads(drain_s: float | None) -> float:
    ports = RunPorts(40000, 40001, 40002, 40003, 40004)
    env = run_env(compile_spec(load_profile(LLAMA)), None, Path("/nonexistent"), ports, "vllm",
                  drain_s)  # fmt: skip
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAY_SERVE_DIRECT")}
    ran = subprocess.run(
        [sys.executable, "-c", PROBE], env=inherited | env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    return float(ran.stdout.strip().splitlines()[-1])


def test_a_local_runs_replicas_do_not_wait_for_a_load_balancer_it_has_not() -> None:
    assert _draining_period_ray_reads(LOCAL_DRAIN_S) == LOCAL_DRAIN_S


def test_a_run_that_keeps_rays_default_waits_as_a_cluster_would() -> None:
    """What the fault runs ask for (`serving.local.faults.runs`): Ray's own 30 s."""
    assert _draining_period_ray_reads(None) == 30.0
