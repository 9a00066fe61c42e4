"""Imports written for the upstream runtime resolve as upstream resolves them (issue 19; upstream facts file,
"Imports"): a relative path is resolved against the importing manifest's directory, then recognised as one of
telo's built-in modules by the resolved directory's name or by the ``metadata.name`` of the ``Telo.Library``
there — never by loading the Node controllers or internal schema references of the library upstream ships.
A library written for Node that telo has no implementation of is one clear ERR_MANIFEST_UNKNOWN_MODULE.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from telo.manifest import ManifestLoadError, load_manifest
from telo.specs import BUILTIN_MODULES

# What upstream's own module directories hold: a Telo.Library named by the module's canonical name, whose
# definitions name Node controllers and reference the manifest grammar's own schema fragments.
NODE_LIBRARY = """\
kind: Telo.Library
metadata: {name: %(name)s, version: 1.4.0}
exports: {kinds: [Workflow]}
---
kind: Telo.Definition
metadata: {name: Workflow}
capability: Telo.Invocable
controllers:
  - pkg:npm/@telorun/%(module)s@1.4.0?local_path=./nodejs#workflow
schema:
  type: object
  properties:
    steps: {$ref: "telo://manifest#/$defs/Step"}
"""

TEST_MANIFEST = """\
kind: Telo.Application
metadata: {name: UpstreamTest}
imports: {Local: %(local)s, Durable: %(durable)s, Journal: durable-journal-sqlite}
---
kind: Journal.Journal
metadata: {name: journal}
path: ./j.db
---
kind: Durable.Sleep
metadata: {name: nap}
for: 1s
---
kind: Local.Workflow
metadata: {name: flow}
journal: !ref journal
steps:
  - {name: nap, invoke: !ref nap}
"""


@pytest.fixture
def upstream_tree(write: Callable[..., Path]) -> Path:
    """``modules/durable-local`` and ``modules/durable`` as upstream ships them, plus a Node-only module."""
    write(NODE_LIBRARY % {"name": "DurableLocal", "module": "durable-local"}, "modules/durable-local/telo.yaml")
    write(NODE_LIBRARY % {"name": "Durable", "module": "durable"}, "modules/durable/telo.yaml")
    # a directory whose name is not the module's: recognised by the library's metadata.name
    write(NODE_LIBRARY % {"name": "DurableLocal", "module": "durable-local"}, "vendor/local-v1/telo.yaml")
    write(NODE_LIBRARY % {"name": "Notify", "module": "notify"}, "modules/notify/telo.yaml")
    return write("", "modules/.keep").parent.parent


@pytest.mark.parametrize(("local", "durable"), [
    ("../", "../../durable"),  # from modules/durable-local/tests: the directory modules/durable-local
    ("..", "../../durable/"),
    ("../../durable-local", "../../durable"),
    ("../../../vendor/local-v1", "../../durable"),  # by the library's metadata.name
])
def test_a_relative_import_from_inside_the_upstream_tree_names_the_built_in_module(
        upstream_tree: Path, write: Callable[..., Path], local: str, durable: str) -> None:
    manifest = write(TEST_MANIFEST % {"local": local, "durable": durable}, "modules/durable-local/tests/t.yaml")
    m = load_manifest(manifest, env={})
    assert m.application.imports["Local"] is BUILTIN_MODULES["durable-local"]
    assert m.application.imports["Durable"] is BUILTIN_MODULES["durable"]
    assert m.resources["flow"].kind == "DurableLocal.Workflow"


def test_a_node_library_telo_does_not_implement_is_one_clear_error(upstream_tree: Path,
                                                                 write: Callable[..., Path]) -> None:
    manifest = write("kind: Telo.Application\nmetadata: {name: T}\nimports: {Notify: ../notify}\n",
                     "modules/durable-local/t.yaml")
    with pytest.raises(ManifestLoadError) as caught:
        load_manifest(manifest, env={})
    [d] = caught.value.diagnostics
    assert d.code == "ERR_MANIFEST_UNKNOWN_MODULE"
    assert "Notify" in d.message and "pkg:npm/@telorun/notify" in d.message
    assert d.hint is not None and "@telo.kind" in d.hint
    assert d.pos is not None and (d.pos.line, Path(d.pos.file).name) == (3, "t.yaml")


def test_an_unresolvable_schema_reference_in_a_users_library_is_a_diagnostic_not_a_traceback(
        write: Callable[..., Path]) -> None:
    write("""
        kind: Telo.Library
        metadata: {name: Mine}
        exports: {kinds: [Box]}
        ---
        kind: Telo.Definition
        metadata: {name: Box}
        capability: Telo.Type
        schema: {type: object, properties: {steps: {$ref: "telo://manifest#/$defs/Step"}}}
        """, "lib/telo.yaml")
    manifest = write("kind: Telo.Application\nmetadata: {name: T}\nimports: {Mine: ./lib}\n---\n"
                     "kind: Mine.Box\nmetadata: {name: b}\nsteps: []\n")
    with pytest.raises(ManifestLoadError) as caught:
        load_manifest(manifest, env={})
    [d] = caught.value.diagnostics
    assert d.code == "ERR_MANIFEST_VALIDATION_FAILED"
    assert "telo://manifest#/$defs/Step" in d.message and "Mine.Box" in d.message


def test_a_library_of_the_users_own_named_like_a_built_in_module_is_theirs(write: Callable[..., Path]) -> None:
    """A library named Console, without controllers, was replaced by the built-in console module."""
    write("kind: Telo.Library\nmetadata: {name: Console}\nexports: {kinds: [Greeting]}\n---\n"
          "kind: Telo.Definition\nmetadata: {name: Greeting}\ncapability: Telo.Type\n", "mylib.yaml")
    write("kind: Telo.Library\nmetadata: {name: Mine}\n", "timer/telo.yaml")  # a directory named like one too
    manifest = write("kind: Telo.Application\nmetadata: {name: T}\nimports: {Mine: ./mylib.yaml, T: ./timer/}\n"
                     "---\nkind: Mine.Greeting\nmetadata: {name: g}\n")
    m = load_manifest(manifest, env={})
    assert m.resources["g"].kind == "Console.Greeting"
    assert m.application.imports["T"] is BUILTIN_MODULES["timer"]  # (a path whose last segment names a module)
