"""Which journal a command means when ``--journal`` and ``--manifest`` do not say (issue 15).

Precedence, first that names something wins: ``--journal`` > ``--manifest`` > ``TELO_JOURNAL`` (a journal name)
> ``TELO_MANIFEST`` (a manifest whose only journal is meant) > the nearest project file found walking up from
the working directory — ``telo.toml``, or ``pyproject.toml`` with a ``[tool.telo]`` table — whose ``journal``
and/or ``manifest`` keys name them (``journal`` first, like the flags), relative to that file's directory.
The nearest project file is the only one read: a nested project does not inherit its parent's journal.

Every answer says where it came from (:attr:`JournalSource.origin`), so an error can say which of these named
a journal that is not there, and a hint can leave out the flag a pasted command would not need.
"""

from __future__ import annotations

import os
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telo.errors import Code, TeloError

ENV_JOURNAL = "TELO_JOURNAL"
ENV_MANIFEST = "TELO_MANIFEST"
PROJECT_FILE = "telo.toml"
FLAGS = ("--journal", "--manifest")


@dataclass(frozen=True, slots=True)
class JournalSource:
    """A journal name or a manifest path (exactly one set), and what named it: a flag, an environment
    variable, or a project file (``/abs/telo.toml``, ``[tool.telo] in /abs/pyproject.toml``)."""

    journal: str | None = None
    manifest: str | None = None
    origin: str = "--journal"

    @property
    def by_flag(self) -> bool:
        return self.origin in FLAGS

    def naming(self) -> str:
        """How an error names the source: ``the journal named by TELO_JOURNAL``."""
        what = "journal" if self.journal is not None else "manifest"
        return f"the {what} named by {self.origin}"

    def flag(self) -> str:
        """The source as command-line options (``--journal 'my runs.db'``), quoted for a shell."""
        if self.journal is not None:
            return f"--journal {shlex.quote(self.journal)}"
        return f"--manifest {shlex.quote(self.manifest or '')}"

    def same_as(self, other: JournalSource | None) -> bool:
        """Whether ``other`` names the same journal or manifest (paths compared absolute)."""
        if other is None:
            return False
        if (self.journal is None) != (other.journal is None):
            return False
        return _absolute(self.journal or self.manifest or "") == _absolute(other.journal or other.manifest or "")


def _absolute(name: str) -> str:
    for scheme in ("sqlite://", "file://"):
        if name.startswith(scheme):
            return os.path.abspath(name.removeprefix(scheme))
    if name in ("memory:", "memory://") or "://" in name:
        return name
    return os.path.abspath(name)


def _anchored(name: str, base: Path) -> str:
    """A journal name from a project file, its relative path taken from the file's directory."""
    if name in ("memory:", "memory://") or name.startswith(("postgresql://", "postgres://")):
        return name
    for scheme in ("sqlite://", "file://"):
        if name.startswith(scheme):
            return scheme + str(base / name.removeprefix(scheme))
    return str(base / name)


def project_file(start: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """The nearest ``telo.toml``, or ``pyproject.toml`` with ``[tool.telo]``, at or above ``start``, and its
    telo table. A ``pyproject.toml`` without the table is no telo project file: the walk goes on past it."""
    for folder in (start, *start.parents):
        for name in (PROJECT_FILE, "pyproject.toml"):
            path = folder / name
            if not path.is_file():
                continue
            data = _read_toml(path)
            if name == PROJECT_FILE:
                return path, data
            tool = data.get("tool")
            table = tool.get("telo") if isinstance(tool, Mapping) else None
            if isinstance(table, Mapping):
                return path, table
    return None


def _read_toml(path: Path) -> Mapping[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TeloError(Code.JOURNAL_CONFIG_INVALID, f"cannot read the project file {str(path)!r}: {exc}",
                        hint="fix its TOML, or name the journal with --journal PATH-or-URL") from exc


def _from_project(start: Path) -> JournalSource | None:
    found = project_file(start)
    if found is None:
        return None
    path, table = found
    origin = str(path) if path.name == PROJECT_FILE else f"[tool.telo] in {path}"
    for key in ("journal", "manifest"):
        value = table.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise TeloError(Code.JOURNAL_CONFIG_INVALID, f"{origin}: `{key}` must be a non-empty string",
                            hint=f'write {key} = "…" (a path relative to the file)')
        if key == "journal":
            return JournalSource(journal=_anchored(value, path.parent), origin=origin)
        return JournalSource(manifest=str(path.parent / value), origin=origin)
    return None


def implicit_source(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> JournalSource | None:
    """The journal named without a flag: the environment, else the nearest project file; None if nothing."""
    env = os.environ if environ is None else environ
    if env.get(ENV_JOURNAL):
        return JournalSource(journal=env[ENV_JOURNAL], origin=ENV_JOURNAL)
    if env.get(ENV_MANIFEST):
        return JournalSource(manifest=env[ENV_MANIFEST], origin=ENV_MANIFEST)
    return _from_project(Path.cwd() if cwd is None else cwd)


def journal_source(journal: str | None, manifest: str | None, environ: Mapping[str, str] | None = None,
                   cwd: Path | None = None) -> JournalSource | None:
    """What a command's ``--journal``/``--manifest`` and its surroundings name, by the module's precedence."""
    if journal:
        return JournalSource(journal=journal, origin="--journal")
    if manifest:
        return JournalSource(manifest=manifest, origin="--manifest")
    return implicit_source(environ, cwd)


def needed_flag(source: JournalSource | None, environ: Mapping[str, str] | None = None,
                cwd: Path | None = None) -> str:
    """The options a command printed for pasting needs to reach ``source``'s journal: none when the
    environment or a project file already leads there, else ``source`` as a flag (``--journal J``)."""
    if source is None:
        return ""
    if not source.by_flag:
        return ""
    try:
        found = implicit_source(environ, cwd)
    except TeloError:  # an unreadable project file finds nothing: the flag is what works
        found = None
    return "" if source.same_as(found) else source.flag()
