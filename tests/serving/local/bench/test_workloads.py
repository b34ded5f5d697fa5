"""`--workload` names, checked in one place for `bench --local` and `bench --url` alike."""

from __future__ import annotations

import pytest

from serving.errors import ServestackError
from serving.local.bench.workloads import WORKLOADS, chosen_workloads


def test_no_name_means_every_workload_at_the_flags_sizes() -> None:
    found = chosen_workloads((), 10, 4, 2, 300, 0.5)
    assert list(found) == list(WORKLOADS)
    assert found["decode-heavy"].requests == 10


def test_named_workloads_only() -> None:
    assert list(chosen_workloads(("hot-prompt",), 10, 4, 2, 300, 0.5)) == ["hot-prompt"]


def test_an_unknown_name_is_refused_naming_the_flag_and_the_workloads() -> None:
    with pytest.raises(ServestackError) as caught:
        chosen_workloads(("decode-hevy",), 10, 4, 2, 300, 0.5)
    assert caught.value.field == "--workload"
    assert "decode-heavy" in caught.value.render()
