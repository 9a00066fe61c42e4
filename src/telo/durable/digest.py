"""The manifest digest (spec §5.2 ``manifestDigest``/``digestScope``, §9 ``ERR_DURABLE_MANIFEST_CHANGED``).

A run records the digest of the resources its body can REACH (the workflow and, transitively, every resource
a reference in its configuration names, inline and ``with:``-scoped ones included). A resume against a
different digest would replay against changed code, so the run is HELD — parked at ``@manifest[n]`` with a
reason naming what changed and how to proceed — until an operator forces it on (``telo resume --force`` or
``Local.Resume``), which is recorded. Edits outside the reachable set (another workflow, a comment, the
order of documents) change nothing, so they never hold a run.

Per-resource digests are recorded once per run at ``@digest``, which is what lets a hold say WHAT changed.
The digest covers the manifest only: a Python function's source is outside it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from telo import paths
from telo.manifest import Cel, Manifest, Ref, ResourceDecl, SqlText, Template
from telo.values import encode_frame

DIGEST_PATH = paths.reserved("digest")


def held_path(n: int) -> str:
    return paths.step_path(paths.reserved("held"), n)


def hold_path(n: int) -> str:
    return paths.step_path(paths.reserved("manifest"), n)


def _normal(node: Any) -> Any:
    """A canonical, JSON-able form of a configuration value (expressions and references by their text)."""
    if isinstance(node, Ref):
        return {"$ref": node.text}
    if isinstance(node, Cel):
        return {"$cel": node.text}
    if isinstance(node, SqlText):  # bound, not spliced: not the same value as a template of the same parts
        return {"$sql": [p.text if isinstance(p, Cel) else p for p in node.parts]}
    if isinstance(node, Template):
        return {"$template": [p.text if isinstance(p, Cel) else p for p in node.parts]}
    if isinstance(node, bytes):
        return {"$bytes": base64.b64encode(node).decode()}
    if isinstance(node, Mapping):
        return {str(k): _normal(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_normal(v) for v in node]
    return node


def _hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _refs(node: Any) -> list[Ref]:
    if isinstance(node, Ref):
        return [node]
    if isinstance(node, Mapping):
        return [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


@dataclass(frozen=True, slots=True)
class Digest:
    value: str
    scope: str  # "reachable" | "manifest"
    resources: Mapping[str, str]  # resource name -> digest of its declaration (the scope's resources)
    manifest: Mapping[str, str] | None = None  # every resource of the manifest, for widening
    # record()'s typed frame, written once: every run of the workflow records it at its start
    frame: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "frame", encode_frame(self.record()))

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"digest": self.value, "scope": self.scope, "resources": dict(self.resources)}
        if self.manifest is not None:
            out["manifest"] = dict(self.manifest)
        return out

    def widened(self) -> Digest:
        """The whole-manifest digest (``digestScope: manifest``): for a run that journaled a target outside
        the reachable set, so the reachable set alone no longer says what the run depends on."""
        every = dict(self.manifest if self.manifest is not None else self.resources)
        return Digest(value_of(every), "manifest", every, every)


def value_of(per_resource: Mapping[str, str]) -> str:
    return _hash(dict(sorted(per_resource.items())))


def _decl_digest(decl: ResourceDecl) -> str:
    return _hash({"kind": decl.kind, "name": decl.name, "config": _normal(decl.config)})


def reachable(manifest: Manifest, root: str) -> dict[str, ResourceDecl]:
    seen: dict[str, ResourceDecl] = {}
    todo = [manifest.resources[root]]
    while todo:
        decl = todo.pop()
        if decl.name in seen:
            continue
        seen[decl.name] = decl
        todo.extend(decl.scoped.values())
        for ref in _refs(decl.config):
            try:
                todo.append(manifest.resolve(ref))
            except KeyError:
                scoped = decl.scoped.get(ref.name)
                if scoped is not None:
                    todo.append(scoped)
    return seen


def digest_of(manifest: Manifest, root: str) -> Digest:
    """The run's digest over what ``root``'s body reaches, carrying every resource's digest for widening."""
    every = {name: _decl_digest(d) for name, d in sorted(manifest.resources.items())}
    per = {name: every[name] for name in sorted(reachable(manifest, root)) if name in every}
    return Digest(value_of(per), "reachable", per, every)


def changes(old: Mapping[str, str], new: Mapping[str, str]) -> dict[str, list[str]]:
    return {
        "changed": sorted(n for n in old.keys() & new.keys() if old[n] != new[n]),
        "added": sorted(new.keys() - old.keys()),
        "removed": sorted(old.keys() - new.keys()),
    }


def describe_changes(diff: Mapping[str, list[str]]) -> str:
    parts = [f"{what}: {', '.join(names)}" for what, names in diff.items() if names]
    return "; ".join(parts) or "the reachable resources differ"
