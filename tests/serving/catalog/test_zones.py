"""The zone catalog: every GPU machine type has somewhere to run, and every zone listed lies in
the region it is listed under."""

from __future__ import annotations

import pytest

from serving import catalog


@pytest.mark.parametrize("machine_type", sorted(catalog.MACHINE_TYPES))
def test_every_machine_type_is_stocked_somewhere(machine_type: str) -> None:
    gke_accelerator = catalog.MACHINE_TYPES[machine_type].gke_accelerator
    regions = catalog.regions_offering(gke_accelerator)
    assert regions
    assert all(catalog.zones_offering(gke_accelerator, region) for region in regions)


def test_every_zone_lies_in_its_region() -> None:
    for regions in catalog.GPU_ZONES.values():
        for region, zones in regions.items():
            assert zones and all(catalog.region_of(zone) == region for zone in zones), region
            assert len(set(zones)) == len(zones), region


def test_a_region_without_the_gpu_offers_no_zone() -> None:
    assert catalog.zones_offering("nvidia-h100-80gb", "southamerica-east1") == ()
    assert catalog.zones_offering("no-such-gpu", "us-central1") == ()
