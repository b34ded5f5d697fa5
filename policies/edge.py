"""The edge: is the API-key gate that HAProxy will actually run closed?

The HAProxy ingress controller (kubernetes-ingress 1.11.x) ignores arguments it does not know,
writes each key of the ConfigMap named by `--configmap-patternfiles` to `patterns/<key>`, and
drops a backend snippet HAProxy refuses (a pattern file that was never written is enough) — and
reloads without it, so every route answers without a key. A text match on the snippet cannot
see any of that; these checks judge the gate as the controller would assemble it: the snippet's
effective lines, the controller's arguments and the ConfigMap they name, together.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import Severity

from policies.common import stack_policy
from policies.views import (
    CONFIGMAP,
    HELM_RELEASE,
    INGRESS,
    ConfigMapView,
    IngressView,
    ReleaseView,
    views,
)
from serving.catalog.edge_controller import (
    CONFIGMAP_KEYS,
    CONTROLLER_ARGUMENTS,
    CONTROLLER_VERSION,
    INGRESS_ANNOTATIONS,
)
from serving.catalog.pins import EDGE_CHART

ANNOTATION_PREFIX = "haproxy.org/"
SNIPPET = f"{ANNOTATION_PREFIX}backend-config-snippet"
PATTERN_FILES_FLAG = "--configmap-patternfiles"
DISABLE_SNIPPETS_FLAG = "--disable-config-snippets"
_PATTERN_REFERENCE = re.compile(r"-f\s+patterns/(\S+)")
_CONTROLLER = f"kubernetes-ingress {CONTROLLER_VERSION}"


def effective_lines(snippet: str) -> list[str]:
    """The snippet's lines HAProxy acts on: comments and blank lines dropped."""
    lines = []
    for line in snippet.splitlines():
        code = line.split("#", 1)[0].strip()
        if code:
            lines.append(code)
    return lines


def snippet_gate_faults(snippet: str) -> tuple[list[str], str | None]:
    """(what is wrong with the snippet as an API-key gate, the pattern file its check reads)."""
    lines = effective_lines(snippet)
    deny = [
        (index, line)
        for index, line in enumerate(lines)
        if line.startswith("http-request deny") and "deny_status 401" in line
    ]
    if not deny:
        return ["no effective `http-request deny deny_status 401` line checks an API key"], None
    index, line = deny[0]
    faults = []
    reference = _PATTERN_REFERENCE.search(line)
    if " unless " not in f" {line} " or reference is None:
        faults.append("the 401 is not denied unless the key matches a pattern file")
    if "digest(sha256)" not in line:
        faults.append("the key is not compared by its SHA-256 (the pattern file holds hashes)")
    if not re.search(r"word\(1,' '\),lower -m str bearer|-m reg -i \^bearer", line):
        faults.append("the authentication scheme is not checked to be Bearer")
    stripped = any(
        later.lower().startswith("http-request del-header authorization")
        for later in lines[index + 1 :]
    )
    if not stripped:
        faults.append("the Authorization header is passed on to Ray")
    return faults, reference.group(1) if reference else None


def argument_name(argument: str) -> str:
    return str(argument).split("=", 1)[0]


def pattern_files_configmap(arguments: list[str]) -> tuple[str, str] | None:
    """(namespace, name) of the pattern-file ConfigMap the controller reads: the last
    `--configmap-patternfiles` wins, as in the controller's flag parser."""
    found = None
    for argument in arguments:
        name, _, value = str(argument).partition("=")
        if name == PATTERN_FILES_FLAG:
            namespace, _, configmap = value.partition("/")
            found = (namespace, configmap) if namespace and configmap else None
    return found


def pattern_files(data: Mapping[str, Any]) -> dict[str, str]:
    """What the controller writes under patterns/ from that ConfigMap's data: each key (its
    part after any `prefix/`) as a file holding the value as it is."""
    return {str(key).split("/", 1)[-1]: str(value) for key, value in data.items()}


@dataclass(frozen=True)
class Edge:
    name: str
    arguments: list[str]
    config: Mapping[str, Any]
    service: Mapping[str, Any]


def edges(resources: list[Any]) -> list[Edge]:
    found = []
    for release in views(resources, HELM_RELEASE, ReleaseView):
        if release.chart != EDGE_CHART.name:
            continue
        controller = release.controller
        found.append(
            Edge(
                release.name,
                [str(a) for a in controller.items("extraArgs")],
                controller.mapping("config"),
                controller.mapping("service"),
            )
        )
    return found


def _configmaps(resources: list[Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {c.key: c.data for c in views(resources, CONFIGMAP, ConfigMapView)}


def _controller_faults(edge: Edge, configmaps: Mapping[tuple[str, str], Any]) -> Iterator[str]:
    for argument in edge.arguments:
        if argument_name(argument) not in CONTROLLER_ARGUMENTS:
            yield (
                f"{edge.name}: {argument_name(argument)} is not an argument {_CONTROLLER} "
                "accepts; it ignores it"
            )
        if argument_name(argument) == DISABLE_SNIPPETS_FLAG and (
            {"all", "backend"} & set(argument.partition("=")[2].split(","))
        ):
            yield f"{edge.name}: {argument} drops every backend snippet, the API-key gate with it"
    for key in edge.config:
        if key not in CONFIGMAP_KEYS:
            yield f"{edge.name}: config key {key} is not one {_CONTROLLER} reads"
    if pattern_files_configmap(edge.arguments) is None:
        yield (
            f"{edge.name}: the controller is given no {PATTERN_FILES_FLAG}=<namespace>/<name>, "
            "so it writes no pattern file and HAProxy drops the API-key check"
        )


def _gate(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    ingresses = views(resources, INGRESS, IngressView)
    found = edges(resources)
    if ingresses and not found:
        yield f"no {EDGE_CHART.name} release serves the stack's {len(ingresses)} route(s)"
    configmaps = _configmaps(resources)
    files: dict[str, str] = {}
    for edge in found:
        yield from _controller_faults(edge, configmaps)
        named = pattern_files_configmap(edge.arguments)
        if named is not None:
            if named not in configmaps:
                yield (
                    f"{edge.name}: {PATTERN_FILES_FLAG} names the ConfigMap "
                    f"{named[0]}/{named[1]}, which the stack does not create"
                )
            else:
                files |= pattern_files(configmaps[named])
    for ingress in ingresses:
        annotations = ingress.annotations
        for key in annotations:
            if key.startswith(ANNOTATION_PREFIX) and key[len(ANNOTATION_PREFIX) :] not in (
                INGRESS_ANNOTATIONS
            ):
                yield f"{ingress.name}: {key} is not an annotation {_CONTROLLER} reads"
        faults, pattern = snippet_gate_faults(str(annotations.get(SNIPPET, "")))
        yield from (f"{ingress.name}: {fault}" for fault in faults)
        if pattern is not None and found and pattern not in files:
            yield (
                f"{ingress.name}: the key check reads patterns/{pattern}, which the controller "
                "never writes, so HAProxy refuses the snippet and the controller drops it: "
                "the route would answer without a key"
            )


def _edge_ports_private(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    for edge in edges(resources):
        enabled = edge.service.get("enablePorts") or {}
        for port in ("stat", "prometheus"):
            # The chart's default is on.
            if enabled.get(port, True) is not False:
                yield f"{edge.name}: the {port} port is on the edge's load balancer"


def _edge_source_ranges(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    for edge in edges(resources):
        annotations = edge.service.get("annotations") or {}
        internal = annotations.get("networking.gke.io/load-balancer-type") == "Internal"
        if not internal and not edge.service.get("loadBalancerSourceRanges"):
            yield (
                f"{edge.name}: the edge's load balancer is public and answers every address "
                "(no loadBalancerSourceRanges)"
            )


EDGE_POLICIES = [
    stack_policy(
        "platform-edge-api-key-gate",
        "The edge's API-key gate is one HAProxy runs: accepted controller arguments, a "
        "pattern-file ConfigMap the stack creates, and a snippet that checks a Bearer key "
        "against it and strips it.",
        f"Create the edge with servestack's EdgeIngress ({PATTERN_FILES_FLAG}=<ns>/<configmap>) "
        "and routes with LlmService; pass only arguments and annotations in "
        "serving/catalog/edge_controller.py.",
        _gate,
        severity=Severity.CRITICAL,
    ),
    stack_policy(
        "platform-edge-stats-private",
        "The edge's stats page and metrics port are not on its load balancer.",
        "Set controller.service.enablePorts.stat and .prometheus to false; scrape HAProxy's "
        "metrics inside the cluster (PodMonitoring).",
        _edge_ports_private,
    ),
    stack_policy(
        "platform-edge-source-ranges",
        "A public edge load balancer answers only the source ranges the stack lists.",
        "Set servestack:edge_source_ranges, or keep servestack:edge_internal: true.",
        _edge_source_ranges,
    ),
]
