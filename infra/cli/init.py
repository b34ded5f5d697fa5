"""`servestack init`: a model profile written from the planner's recommendation, and the model
added to a stack, so that `plan` and `preview` run on it at once.

The model is a catalog architecture, or a Hugging Face repo: its architecture is a catalog key
(--architecture), or read from its config.json (--config PATH, else fetched from the Hub) and
written inline in the profile with where it came from. The machine type and layout are the
recommender's winner among what the stack can build, as the platform planner judges it with the
new model in the stack (GCP sells the small A3 sizes as Spot or Flex-start only, which a stack
must choose; a zonal stack gets only GPUs its zone stocks). Nothing is overwritten; the stack
file is edited in place (its comments kept), and if the stack then fails to load, both files
are put back as they were.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from infra.cli.hub import COMMAND_LINE, fetch_model_files
from infra.platform.config import Stack, load_stack, profile_path
from infra.platform.plan import plan_platform
from infra.platform.stack_config import DEFAULT_STACK
from serving import catalog
from serving.catalog import Architecture
from serving.catalog.importer import import_architecture, read_model_files
from serving.errors import ServestackError, unknown_key_fix
from serving.plan.planner import plan
from serving.recommend.ranking import (
    DEFAULT_ITL_TARGET_S,
    DEFAULT_TTFT_TARGET_S,
    Candidate,
    candidate_spec,
    recommend,
)
from serving.spec.loading import display_path, validate
from serving.spec.profile import ModelSpec

# A context long enough for chat with retrieved documents, short enough that most models fit one
# GPU's KV cache beside their weights; the model's own limit where that is shorter.
DEFAULT_MAX_MODEL_LEN = 8192
_MODELS_KEY = re.compile(r"^(?P<indent>\s*)servestack:models:\s*(?P<rest>.*)$")


@dataclass(frozen=True)
class Initialized:
    profile: Path
    stack: Path
    spec: ModelSpec
    choice: Candidate


def init_model(
    model: str,
    stack_name: str = DEFAULT_STACK,
    *,
    architecture: str | None = None,
    config: Path | None = None,
    revision: str | None = None,
    accelerator: str | None = None,
    max_model_len: int | None = None,
    name: str | None = None,
    root: Path | None = None,
) -> Initialized:
    """Write `stacks/models/<name>.yaml` for `model` and add it to the stack's models."""
    stack = load_stack(stack_name, root)
    served = name or (model.rsplit("/", 1)[-1].lower() if "/" in model else model)
    arch, source = _architecture_and_source(model, architecture, config, revision, served)
    arch_key = arch.key
    if accelerator is not None and accelerator not in catalog.ACCELERATORS:
        raise ServestackError(
            COMMAND_LINE, "--accelerator", f"unknown accelerator '{accelerator}'",
            unknown_key_fix(accelerator, catalog.ACCELERATORS, "accelerators"),
        )  # fmt: skip
    length = max_model_len or min(DEFAULT_MAX_MODEL_LEN, arch.max_position_embeddings)
    if not 16 <= length <= arch.max_position_embeddings:
        raise ServestackError(
            COMMAND_LINE, "--max-model-len", f"{length:,} tokens is not a context {arch_key} has",
            f"use a length from 16 to {arch.max_position_embeddings:,}",
        )  # fmt: skip
    base = validate(
        ModelSpec,
        {
            "name": served,
            "source": source,
            "architecture": arch_key if arch.source is None else arch,
            "accelerator": accelerator or "h100-80gb",
            "max_model_len": length,
        },
        COMMAND_LINE,
    )
    path = profile_path(stack.path, served)
    _refuse_existing(stack, served, path)
    choice, spec = _choose(base, stack, accelerator)
    stack_text = stack.path.read_text(encoding="utf-8")
    path.write_text(_profile_text(model, spec, choice), encoding="utf-8")
    try:
        stack.path.write_text(_add_model(stack_text, served, stack.path), encoding="utf-8")
        load_stack(stack_name, root)
    except BaseException:
        # Fail closed: a stack that no longer loads is put back as it was.
        path.unlink(missing_ok=True)
        stack.path.write_text(stack_text, encoding="utf-8")
        raise
    return Initialized(path, stack.path, spec, choice)


def _architecture_and_source(
    model: str, architecture: str | None, config: Path | None, revision: str | None, served: str
) -> tuple[Architecture, str]:
    """The model's architecture and where its weights come from."""
    if config is not None or (architecture is None and "/" in model):
        if architecture is not None:
            raise ServestackError(
                COMMAND_LINE, "--config", "gives the architecture, and so does --architecture",
                "pass one of them",
            )  # fmt: skip
        if "/" not in model:
            raise ServestackError(
                COMMAND_LINE, "MODEL", f"'{model}' is not a Hugging Face repo (org/name)",
                "name the repo the weights come from, e.g. Qwen/Qwen3-8B, with --config",
            )  # fmt: skip
        if config is not None:
            if revision is not None:
                raise ServestackError(
                    COMMAND_LINE, "--revision", "names a Hub revision, but --config reads a file",
                    "drop --revision, or --config to read that revision from the Hub",
                )  # fmt: skip
            files = read_model_files(config, str(config))
            source = None  # the importer records the file's sha256
        else:
            fetched = fetch_model_files(model, revision)
            files, source = fetched.files, fetched.source
        arch = import_architecture(
            files.config, files.index, key=served, hf_repo=model, source=source
        )
        return arch, model
    if revision is not None:
        raise ServestackError(
            COMMAND_LINE, "--revision", "is for an architecture read from the Hub",
            "drop --revision, or --architecture to read the config from the Hub",
        )  # fmt: skip
    key, source = _catalog_key_and_source(model, architecture)
    return catalog.ARCHITECTURES[key], source


def _catalog_key_and_source(model: str, architecture: str | None) -> tuple[str, str]:
    if architecture is not None:
        if architecture not in catalog.ARCHITECTURES:
            raise ServestackError(
                COMMAND_LINE, "--architecture", f"no catalog architecture '{architecture}'",
                unknown_key_fix(architecture, catalog.ARCHITECTURES, "architectures"),
            )  # fmt: skip
        if "/" not in model:
            raise ServestackError(
                COMMAND_LINE, "MODEL", f"'{model}' is not a Hugging Face repo (org/name)",
                "name the repo the weights come from, e.g. Qwen/Qwen3-8B, or drop --architecture "
                "for a catalog model",
            )  # fmt: skip
        return architecture, model
    if model in catalog.ARCHITECTURES:
        arch = catalog.ARCHITECTURES[model]
        return model, arch.hf_repo or f"unknown/{model}"
    raise ServestackError(
        COMMAND_LINE, "MODEL", f"no catalog model '{model}'",
        unknown_key_fix(model, catalog.ARCHITECTURES, "models")
        + " (or a Hugging Face repo: org/name)",
    )  # fmt: skip


def _refuse_existing(stack: Stack, served: str, path: Path) -> None:
    if path.exists():
        raise ServestackError(
            display_path(path), "", "already exists; servestack init never overwrites a profile",
            "edit that file, or pick another name with --name",
        )  # fmt: skip
    if served in stack.profiles or any(s.name == served for s in stack.profiles.values()):
        raise ServestackError(
            display_path(stack.path), "servestack:models", f"already serves a model '{served}'",
            "pick another name with --name",
        )  # fmt: skip


def _unbuildable(choice: Candidate, spec: ModelSpec, stack: Stack) -> str | None:
    """Why the stack cannot build the candidate, or None where it can."""
    machine = catalog.MACHINE_TYPES[choice.machine_type]
    spans = choice.gpus_per_replica > machine.gpus_per_node
    if spans and choice.parallelism.expert and not catalog.NODE_POOLS_ATTACH_GPU_NETWORK:
        return "DP+EP across nodes needs the GPUs' own NICs, which node pools do not attach yet"
    # The stack's own rules decide the rest (Spot-only sizes, the zones that stock a GPU):
    # the platform `pulumi up` would build, planned with the new model in it.
    try:
        plan_platform(replace(stack, profiles={**stack.profiles, spec.name: spec}))
    except ServestackError as exc:
        return f"{exc.field}: {exc.problem}"
    return None


def _choose(base: ModelSpec, stack: Stack, accelerator: str | None) -> tuple[Candidate, ModelSpec]:
    ranked = recommend(base, DEFAULT_ITL_TARGET_S, DEFAULT_TTFT_TARGET_S, stack.config.prices)
    usable = [
        c
        for c in ranked
        if c.refused_by is None and (accelerator is None or c.accelerator == accelerator)
    ]
    specs = {id(c): candidate_spec(base, c) for c in usable}
    # The recommendation among layouts `plan` has no warning about (an over-sharded layout can
    # tie on cost, yet the pack flags it); else the cheapest that meets the latency targets;
    # else the cheapest that works at all (the profile says so, and `plan` shows its latency).
    preferred = sorted(
        usable,
        key=lambda c: (
            not c.meets_targets,
            bool(plan(specs[id(c)], stack.config.prices).verdicts),
        ),
    )
    first_refusal = None
    for candidate in preferred:
        spec = specs[id(candidate)]
        refusal = _unbuildable(candidate, spec, stack)
        if refusal is None:
            return candidate, spec
        first_refusal = first_refusal or f"{candidate.machine_type}: {refusal}"
    where = f" on {accelerator}" if accelerator else ""
    problem = (
        f"{base.architecture.key} at max_model_len {base.max_model_len:,} fits no catalog "
        f"machine{where}"
        if first_refusal is None
        else f"{base.architecture.key} fits{where}, but not on anything the stack "
        f"{stack.name} can build (first: {first_refusal})"
    )
    raise ServestackError(
        COMMAND_LINE, "MODEL", problem,
        "a shorter --max-model-len, another --accelerator, or a gpu_pools entry in the stack "
        "for a Spot-only machine type (see `servestack plan --recommend "
        f"{base.architecture.key} --all`)",
    )  # fmt: skip


def _profile_text(model: str, spec: ModelSpec, choice: Candidate) -> str:
    arch = spec.architecture
    fields: dict[str, Any] = {
        "name": spec.name,
        "source": spec.source,
        # A catalog architecture by its key; one read from a config.json whole, with its source.
        "architecture": arch.key
        if arch.source is None
        else arch.model_dump(mode="json", exclude_defaults=True),
    }
    if spec.quantization != "none":
        fields["quantization"] = spec.quantization
    if spec.kv_cache_dtype != "auto":
        fields["kv_cache_dtype"] = spec.kv_cache_dtype
    fields.update(
        accelerator=spec.accelerator,
        machine_type=spec.machine_type,
        parallelism=spec.parallelism.model_dump(),
        max_model_len=spec.max_model_len,
    )
    cost = choice.usd_per_million_output_tokens
    verdict = (
        "the planner's recommendation"
        if choice.meets_targets
        else "no layout meets the default latency targets; this is the cheapest that works"
    )
    header = (
        f"# Written by `servestack init {model}`: {verdict} ({choice.machine_type}, "
        f"{choice.layout}, ${cost:,.2f} per million output tokens at its estimates).\n"
        if cost is not None
        else f"# Written by `servestack init {model}`: {verdict}.\n"
    )
    if arch.source is not None:
        header += f"# The architecture was read from {arch.source}.\n"
    return header + yaml.safe_dump(fields, sort_keys=False)


def _add_model(text: str, served: str, stack_path: Path) -> str:
    """The stack file with `served` appended to `servestack:models`, everything else as it was."""
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        found = _MODELS_KEY.match(line.rstrip("\n"))
        if found is None:
            continue
        rest = found["rest"]
        if rest.startswith("[") and rest.rstrip().endswith("]"):
            inner = rest.strip()[1:-1].strip()
            listed = f"[{inner}, {served}]" if inner else f"[{served}]"
            lines[index] = f"{found['indent']}servestack:models: {listed}\n"
            return "".join(lines)
        if not rest:
            last = index
            item_indent = None
            for later in range(index + 1, len(lines)):
                item = re.match(r"^(\s*)- ", lines[later])
                if item is None or len(item[1]) <= len(found["indent"]):
                    break
                item_indent, last = item[1], later
            if item_indent is not None:
                lines.insert(last + 1, f"{item_indent}- {served}\n")
                return "".join(lines)
    raise ServestackError(
        display_path(stack_path), "servestack:models",
        "servestack init cannot add a model to this list as it is written",
        f"write it as a YAML list and add '{served}' yourself",
    )  # fmt: skip
