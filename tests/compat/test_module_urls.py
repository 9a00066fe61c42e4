"""Module URLs as the Node runtime spells them, and either spelling read (issue 19, "Journals both ways").

A step entry's target records its declaring module, the manifest's ``file://`` URL, and an upstream replay
compares it exactly (``ERR_JOURNAL_ENTRY_MISMATCH`` otherwise). telo spelled it ``Path.resolve().as_uri()``:
symlinks resolved, ``!$&'()*+,;=:@`` percent-encoded and ``~`` kept — Node's ``url.pathToFileURL`` resolves no
symlink, keeps those and encodes ``~``. Now telo spells it as Node does (``telo.targets.file_url``), and a run
recorded under the old spelling still replays (``telo.targets.same_module``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import telo
from telo.analysis import cel_checker
from telo.journal.file import FileStore
from telo.manifest import load_manifest
from telo.targets import file_url, same_module, targets_match
from tests.compat.approval_flow import approval_flow

# Every printable ASCII character that is not a letter or digit, a control, and a non-ASCII letter.
ODD = "a b~c!$&'()*+,;=:@d%e#f?g[h]i^j|k\"l<m>n`o{p}q\\ré\tz"
# What Node's pathToFileURL makes of it (node_url.cc's escape table, then the WHATWG path percent-encode set).
NODE = "a%20b%7Ec!$&'()*+,;=:@d%25e%23f%3Fg%5Bh%5Di%5Ej%7Ck%22l%3Cm%3En%60o%7Bp%7Dq%5Cr%C3%A9%09z"
# What telo wrote before: Python's quote() keeps ~ and encodes the sub-delimiters, ':' and '@'.
OLD = ("a%20b~c%21%24%26%27%28%29%2A%2B%2C%3B%3D%3A%40d%25e%23f%3Fg%5Bh%5Di%5Ej%7Ck%22l%3Cm%3En%60o%7Bp%7Dq%5C"
       "r%C3%A9%09z")


def test_file_url_percent_encodes_exactly_what_node_does() -> None:
    assert file_url(f"/srv/{ODD}/flow.yaml") == f"file:///srv/{NODE}/flow.yaml"
    assert Path(f"/srv/{ODD}/flow.yaml").as_uri() == f"file:///srv/{OLD}/flow.yaml"  # the spelling it replaces
    assert file_url("/srv/plain-name_1.0/flow.yaml") == "file:///srv/plain-name_1.0/flow.yaml"


def test_file_url_is_absolute_and_normalised_like_path_resolve(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert file_url("sub/../flow.yaml") == file_url(tmp_path / "flow.yaml") == f"file://{tmp_path}/flow.yaml"
    assert file_url("//srv//x/./flow.yaml") == "file:///srv/x/flow.yaml"


def test_a_manifest_behind_a_symlink_keeps_the_path_it_was_named_by(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "flow.yaml").write_text("kind: Telo.Application\nmetadata: { name: Flow }\n")
    (tmp_path / "link").symlink_to(real)
    manifest = load_manifest(tmp_path / "link" / "flow.yaml", cel_checker=cel_checker)
    assert manifest.module == f"file://{tmp_path}/link/flow.yaml"  # Node's path.resolve: no symlink resolved


def test_an_imported_library_behind_a_symlink_keeps_the_path_it_was_imported_by(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "telo.yaml").write_text("kind: Telo.Library\nmetadata: { name: Lib }\n")
    (tmp_path / "lib").symlink_to(real)
    (tmp_path / "app.yaml").write_text("kind: Telo.Application\nmetadata: { name: A }\nimports: { L: ./lib }\n")
    manifest = load_manifest(tmp_path / "app.yaml", cel_checker=cel_checker)
    library = manifest.application.imports["L"]
    assert getattr(library, "module", None) == f"file://{tmp_path}/lib/telo.yaml"  # was .../real/telo.yaml


def test_same_module_reads_either_spelling(tmp_path: Path) -> None:
    real = tmp_path / f"real {ODD.replace('/', '')}"
    real.mkdir()
    (real / "flow.yaml").write_text("")
    link = tmp_path / "li~nk"
    link.symlink_to(real)
    old, new = (real / "flow.yaml").resolve().as_uri(), file_url(link / "flow.yaml")
    assert old != new and same_module(old, new) and same_module(new, old)
    assert same_module(file_url(real / "flow.yaml"), new)
    assert not same_module(new, file_url(tmp_path / "other.yaml"))
    assert same_module("oci://ghcr.io/acme/mail@1", "oci://ghcr.io/acme/mail@1")
    assert not same_module("oci://ghcr.io/acme/mail@1", "oci://ghcr.io/acme/mail@2")
    assert not same_module(new, "oci://" + new.removeprefix("file://"))
    t = {"kind": "Run.Value", "name": "greet"}
    assert targets_match({**t, "module": old}, {**t, "module": new})
    assert not targets_match({**t, "module": old}, {**t, "name": "other", "module": new})


MANIFEST = approval_flow("Spelled", "durable-journal-file", "directory: ./journal")


def test_a_run_recorded_with_the_old_spelling_continues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real dir~!$&'()*+,;=:@"
    real.mkdir()
    (real / "flow.yaml").write_text(MANIFEST)
    (tmp_path / "link").symlink_to(real)
    path = tmp_path / "link" / "flow.yaml"
    old = path.resolve().as_uri()
    monkeypatch.setattr("telo.manifest.loader.file_url", lambda p: Path(p).resolve().as_uri())  # telo before
    with telo.load(str(path)) as app:
        assert app.run("flow", {"id": "x"}).status == "parked"
    monkeypatch.undo()
    first = FileStore(str(real / "journal")).read_entries("flow:x")
    recorded = {e.path: e.target for e in first if e.target is not None}
    assert recorded["steps/first"] == {"kind": "Run.Value", "name": "greet", "module": old}
    with telo.load(str(path)) as app:
        assert app.manifest.module == file_url(path) != old
        assert app.deliver("go:x", {"by": "bob"}).delivered
        result = app.wait("flow:x", timeout=30)
    assert result.status == "completed", result.error  # no ERR_JOURNAL_ENTRY_MISMATCH at steps/first
    assert result.step("first") == "hello ada" and result.step("last") == "hello bob"
    assert result.replayed_steps >= 1
    last = {e.path: e.target for e in FileStore(str(real / "journal")).read_entries("flow:x") if e.target}
    assert last["steps/last"] == {"kind": "Run.Value", "name": "greet", "module": file_url(path)}
    assert os.path.realpath(path) == str((real / "flow.yaml").resolve())


def test_a_library_imported_by_a_manifest_behind_a_symlink_keeps_the_symlink(tmp_path: Path) -> None:
    """The importing manifest's directory was resolved: Node would spell the library `…/link/lib.yaml` and
    refuse every step that targets its resources (from review)."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "lib.yaml").write_text("kind: Telo.Library\nmetadata: { name: Lib }\n")
    (real / "app.yaml").write_text("kind: Telo.Application\nmetadata: { name: A }\nimports: { L: ./lib.yaml }\n")
    (tmp_path / "link").symlink_to(real)
    manifest = load_manifest(tmp_path / "link" / "app.yaml", cel_checker=cel_checker)
    assert getattr(manifest.application.imports["L"], "module", None) == f"file://{tmp_path}/link/lib.yaml"
