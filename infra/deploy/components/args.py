"""The base of every component's arguments: frozen, no unknown keys, and room for Pulumi's
`Output` values, which pydantic cannot describe."""

from __future__ import annotations

from pydantic import ConfigDict

from serving.frozen import Frozen


class ComponentArgs(Frozen):
    """Arguments of one ComponentResource."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
