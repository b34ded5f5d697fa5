"""What every view stands on: the resource types the pack judges, the one fail-closed error (a
resource missing what a policy needs names itself and the field), the typed readers of a
resource's inputs, and the cache that builds one view per resource per run.

The analyzer hands one resource's inputs to every policy: in the offline preview the same dict,
in Pulumi's analyzer a fresh copy per policy. Views are cached by the identity of that dict (the
cache holds it, so its id cannot be reused while cached); what is costly to derive from it (the
Serve config, the profile, the planner's verdicts) is memoised by content in the modules that
derive it, so a copy costs no second parse either. `forget()` empties every cache."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

RAYSERVICE = "kubernetes:ray.io/v1:RayService"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
REDIS = "gcp:redis/instance:Instance"

MISSING = "is missing"


class UnreadableError(Exception):
    """A resource lacks what a policy needs to judge it, or holds it in a shape no policy can
    read. The pack reports it as a violation naming the resource and the field: never a pass,
    never a traceback."""

    def __init__(self, resource: str, field: str, problem: str = MISSING) -> None:
        super().__init__(f"{field} {problem}")
        self.resource = resource
        self.field = field
        self.problem = problem


Value = TypeVar("Value")


class Reader:
    """Typed reads of one resource's inputs (camelCase, as the analyzer hands them over), each
    naming the dotted path it read when the value is missing or of the wrong shape."""

    def __init__(self, resource: str, props: Any, where: str = "") -> None:
        self.resource = resource
        self.props = props
        self.where = where

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _walk(self, path: str, *, required: bool) -> Any:
        node: Any = self.props
        walked = self.where
        for key in path.split("."):
            walked = f"{walked}.{key}" if walked else key
            if not isinstance(node, Mapping):
                raise UnreadableError(self.resource, walked.rpartition(".")[0], "is not an object")
            node = node.get(key)
            if node is None:
                if required:
                    raise UnreadableError(self.resource, walked)
                return None
        return node

    def need(self, path: str) -> Any:
        """The value at `path`; a missing one is unreadable."""
        return self._walk(path, required=True)

    def get(self, path: str, default: Any = None) -> Any:
        """The value at `path`, or `default` where it (or a mapping above it) is absent."""
        value = self._walk(path, required=False)
        return default if value is None else value

    def mapping(self, path: str, *, required: bool = False) -> Mapping[str, Any]:
        value = self._walk(path, required=required)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise UnreadableError(self.resource, self._path(path), "is not an object")
        return value

    def items(self, path: str, *, required: bool = False) -> list[Any]:
        value = self._walk(path, required=required)
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            raise UnreadableError(self.resource, self._path(path), "is not a list")
        return list(value)

    def at(self, path: str, *, required: bool = False) -> Reader:
        """A reader of the object at `path` (an absent optional one reads as empty)."""
        return Reader(self.resource, self.mapping(path, required=required), self._path(path))

    def number(self, path: str, default: float | None = None) -> float:
        value = self._walk(path, required=default is None)
        if value is None:
            assert default is not None
            return default
        return as_number(value, self.resource, self._path(path))

    def integer(self, path: str, default: int | None = None) -> int:
        return int(self.number(path, None if default is None else float(default)))

    def text(self, path: str, default: str | None = None) -> str | None:
        value = self._walk(path, required=False)
        return default if value is None else str(value)

    def labels(self, path: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.mapping(path).items()}


def as_number(value: Any, resource: str, field: str) -> float:
    if isinstance(value, bool):
        raise UnreadableError(resource, field, f"is {value}, not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise UnreadableError(resource, field, f"is {value!r}, not a number") from None


def of(resources: list[Any], resource_type: str) -> Iterator[Any]:
    """The resources of one type, in the order the analyzer gave them."""
    return (r for r in resources if r.resource_type == resource_type)


# --- one view per resource per run --------------------------------------------------------

_CACHE_SIZE = 1024
_views: OrderedDict[tuple[Any, int, str], tuple[Any, Any]] = OrderedDict()
_forgetters: list[Callable[[], None]] = []


View = TypeVar("View")


def cached(kind: Callable[[str, Any], View], name: str, props: Any) -> View:
    """The view `kind(name, props)`, built once for this props object."""
    key = (kind, id(props), name)
    hit = _views.get(key)
    if hit is not None and hit[0] is props:
        _views.move_to_end(key)
        view: View = hit[1]
        return view
    view = kind(name, props)
    _views[key] = (props, view)
    if len(_views) > _CACHE_SIZE:
        _views.popitem(last=False)
    return view


Memo = TypeVar("Memo", bound=Callable[..., Any])


def remembers(memo: Memo) -> Memo:
    """Register a content memo (an `lru_cache`, or anything with `cache_clear`), so `forget()`
    empties it too."""
    _forgetters.append(memo.cache_clear)  # type: ignore[attr-defined]
    return memo


def also_forget(clear: Callable[[], None]) -> None:
    """Register a memo's own clearing function with `forget()`."""
    _forgetters.append(clear)


def forget() -> None:
    """Empty every view cache and content memo (a new run, or a test that counts parses)."""
    _views.clear()
    for clear in _forgetters:
        clear()
