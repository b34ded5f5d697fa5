"""The platform a stack gets is derived from its models' plans and the catalog, and a stack that
cannot be built is refused before anything is registered, naming the file, the key and a fix.

Expected figures come from the planner and the catalog (what the pools must follow), never from
the stack file being echoed back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run
from infra_support import PLANNED_CHAINS, PLANNED_POOLS
from stack_edits import DEV, PROD, reserved, stack_edit, with_keys

from infra.platform.config import load_stack
from infra.platform.plan import PlatformPlan, node_service_account_id, plan_platform
from serving import catalog
from serving.compile.scheduling import (
    COMPUTE_CLASS_LABEL,
    GKE_ACCELERATOR_LABEL,
    MACHINE_TYPE_LABEL,
)


class TestPoolsFollowThePlans:
    """One GPU pool per machine type the plans use, bounded by the sum of the plans' nodes."""

    @pytest.mark.parametrize("stack", ["dev", "prod"])
    def test_one_pool_per_planned_machine_type_with_summed_node_bounds(
        self, repo: Path, stack: str
    ) -> None:
        platform = plan_platform(load_stack(stack, repo))
        planned = PLANNED_POOLS[stack]
        # A chain's steps each start empty and reach the machine type's maximum; its class keeps
        # the plans' minimum up on whichever step has room.
        bounds: dict[str, set[tuple[int, int]]] = {}
        for pool in platform.gpu_pools:
            low = pool.class_min_nodes if pool.compute_class else pool.min_nodes
            bounds.setdefault(pool.machine_type, set()).add((low, pool.max_nodes))
            assert pool.min_nodes == (0 if pool.compute_class else low)
        assert bounds == {machine: {(low, high)} for machine, (low, high, _) in planned.items()}
        assert [p.mode for p in platform.gpu_pools] == [
            mode for chain in PLANNED_CHAINS[stack].values() for mode in chain
        ]

    def test_prod_shares_its_chain_between_its_two_models(self, repo: Path) -> None:
        for pool in plan_platform(load_stack("prod", repo)).gpu_pools:
            assert set(pool.models) == set(load_stack("prod", repo).profiles)

    @pytest.mark.parametrize("stack", ["dev", "prod"])
    def test_node_selector_names_the_machine_type_and_its_gke_accelerator(
        self, repo: Path, stack: str
    ) -> None:
        # Without the shipped stacks' chains (whose steps select their class instead).
        edit = {"dev": {"a3-highgpu-1g": {"spot": True}}, "prod": {}}[stack]
        stack_edit(DEV if stack == "dev" else PROD, with_keys(gpu_pools=edit))(repo)
        for pool in plan_platform(load_stack(stack, repo)).gpu_pools:
            machine = catalog.MACHINE_TYPES[pool.machine_type]
            assert pool.node_selector == {
                MACHINE_TYPE_LABEL: machine.name,
                GKE_ACCELERATOR_LABEL: machine.gke_accelerator,
            }

    @pytest.mark.parametrize("stack", ["dev", "prod"])
    def test_a_chains_steps_select_its_compute_class(self, repo: Path, stack: str) -> None:
        for pool in plan_platform(load_stack(stack, repo)).gpu_pools:
            assert pool.node_selector == {COMPUTE_CLASS_LABEL: f"servestack-{pool.chain_of}"}


# DeepSeek-V3 does not fit one node of eight A100 80GB, so a replica spans two (a model that
# one node holds would be a needless span, refused by plan and pack alike).
SPANNING_PROFILE = {
    "name": "llama-3.3-70b-pp",
    "source": "deepseek-ai/DeepSeek-V3",
    "architecture": "deepseek-v3",
    "accelerator": "a100-80gb",
    "parallelism": {"tensor": 8, "pipeline": 2},
    "max_model_len": 32768,
    "autoscaling": {"min_replicas": 1, "max_replicas": 2},
}


def _mixed_stack(root: Path, **h100_options: Any) -> PlatformPlan:
    """A stack serving DeepSeek-V3 over two A100 nodes per replica and the 8B on one H100."""
    (root / "stacks/models/llama-3.3-70b-pp.yaml").write_text(yaml.safe_dump(SPANNING_PROFILE))
    (root / "stacks/Pulumi.mixed.yaml").write_text(
        yaml.safe_dump(
            {
                "config": {
                    "gcp:project": "my-gcp-project",
                    "gcp:region": "us-central1",
                    "servestack:models": ["llama-3.3-70b-pp", "llama-3.1-8b"],
                    "servestack:gpu_pools": {"a3-highgpu-1g": {"spot": True, **h100_options}},
                }
            }
        )
    )
    return plan_platform(load_stack("mixed", root))


class TestCompactPlacement:
    """Compact placement exactly where a replica spans nodes or the stack asks for it; a compact
    pool sits in one zone, a spread one in every zone of the region that stocks its GPU."""

    def test_only_the_pool_whose_replicas_span_nodes_is_compact(self, repo: Path) -> None:
        pools = {pool.machine_type: pool for pool in _mixed_stack(repo).gpu_pools}
        # DeepSeek-V3's replica spans two a2-ultragpu-8g nodes; the 8B takes one H100.
        assert {machine: pool.compact for machine, pool in pools.items()} == {
            "a2-ultragpu-8g": True,
            "a3-highgpu-1g": False,
        }
        spanning = [pool for pool in pools.values() if pool.compact]
        spread = [pool for pool in pools.values() if not pool.compact]
        assert len(spanning) == 1 and len(spread) == 1
        assert len(spanning[0].zones) == 1
        assert spread[0].zones == list(
            catalog.zones_offering(spread[0].machine.gke_accelerator, "us-central1")
        )

    def test_a_stack_can_ask_for_compact_placement_where_no_replica_spans(self, repo: Path) -> None:
        pools = {p.machine_type: p for p in _mixed_stack(repo, compact_placement=True).gpu_pools}
        assert not pools["a3-highgpu-1g"].replicas_span_nodes
        assert pools["a3-highgpu-1g"].compact
        assert len(pools["a3-highgpu-1g"].zones) == 1

    def test_a_reserved_pool_may_ask_for_compact_placement_in_its_zone(self, repo: Path) -> None:
        reserved()(repo)
        (pool,) = plan_platform(load_stack("prod", repo)).gpu_pools
        assert pool.compact and not pool.replicas_span_nodes
        assert pool.zones == ["us-central1-a"]

    def test_prods_chain_is_spread_in_its_reservations_zone(self, repo: Path) -> None:
        """No prod replica spans nodes, and GKE gives no compact flex-start a3-highgpu pool."""
        for pool in plan_platform(load_stack("prod", repo)).gpu_pools:
            assert not pool.compact and not pool.replicas_span_nodes
            assert pool.zones == ["us-central1-a"]


class TestStackDefaults:
    """What a stack leaves unsaid is safe: regional, closed control plane, deletion protected."""

    def test_prod_is_regional_and_dev_zonal(self, repo: Path) -> None:
        assert plan_platform(load_stack("prod", repo)).cluster.location == "us-central1"
        assert plan_platform(load_stack("dev", repo)).cluster.location == "us-central1-a"

    @pytest.mark.parametrize("stack", ["dev", "prod"])
    def test_no_shipped_stack_opens_the_control_plane(self, repo: Path, stack: str) -> None:
        cluster = plan_platform(load_stack(stack, repo)).cluster
        assert all(network.prefixlen > 0 for network in cluster.master_authorized_networks)
        assert not cluster.allow_public_control_plane

    def test_node_service_account_ids_fit_gcp_and_differ_per_stack(self) -> None:
        long_names = ["production-europe-west4", "production-europe-west1"]
        ids = [node_service_account_id(name) for name in ["dev", *long_names]]
        assert ids[0] == "servestack-dev-nodes"
        assert all(6 <= len(account) <= 30 for account in ids)
        assert len(set(ids)) == len(ids)


# --- bad input: tests/infra/platform/test_bad_stacks.py --------------------------------


def test_an_open_control_plane_is_accepted_only_when_the_stack_says_so(repo: Path) -> None:
    stack_edit(
        PROD, with_keys(master_authorized_networks=["0.0.0.0/0"], allow_public_control_plane=True)
    )(repo)
    cluster = plan_platform(load_stack("prod", repo)).cluster
    assert [str(n) for n in cluster.master_authorized_networks] == ["0.0.0.0/0"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_pools_json_carries_the_platform_plan(repo: Path, stack: str) -> None:
    result = run(repo, "pools", stack, "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    platform = plan_platform(load_stack(stack, repo))
    expected = platform.model_dump(mode="json")
    for pool, spec in zip(expected["gpu_pools"], platform.gpu_pools, strict=True):
        pool.update(
            compact=spec.compact,
            provisioning=spec.provisioning,
            node_selector=spec.node_selector,
            way=spec.way,
            quota=[{"metric": metric, "gpus": gpus} for metric, gpus in spec.quota],
        )
    assert printed == expected


def test_pools_prints_each_pool_with_its_gpus_bounds_and_placement(repo: Path) -> None:
    reserved()(repo)
    result = run(repo, "pools", "prod")
    assert result.returncode == 0, result.stderr
    (pool,) = plan_platform(load_stack("prod", repo)).gpu_pools
    machine = pool.machine
    line = next(row for row in result.stdout.splitlines() if pool.machine_type in row)
    for cell in (
        f"{machine.gpus_per_node}× {machine.accelerator}",
        f"{pool.min_nodes}–{pool.max_nodes}",
        "compact",
        "us-central1-a",
    ):
        assert cell in line, (cell, line)
