"""The ``telo`` group loads a command's module only when the command runs (telo.cli.main.COMMAND_MODULES): every
invocation used to import every command module (~0.45 s of a 0.7 s ``telo --version``). The table must name every
command the modules define, and nothing else."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from click.testing import CliRunner

from telo.cli.main import COMMAND_MODULES, cli


def test_the_table_names_exactly_the_commands_the_modules_define() -> None:
    defined = {}
    for module_name in set(COMMAND_MODULES.values()):
        module = importlib.import_module(f"telo.cli.{module_name}")
        defined.update({command.name: module_name for command in module.COMMANDS})
    assert defined == COMMAND_MODULES


def test_importing_the_group_imports_no_command_module() -> None:
    probe = ("import sys; import telo.cli.main; "
             "import json; print(json.dumps(sorted(m for m in sys.modules "
             "if m.startswith(('telo.cli.', 'telo.manifest', 'telo.kinds')))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == ["telo.cli.common", "telo.cli.logs", "telo.cli.main"], out.stdout


def test_help_lists_every_command_and_a_nested_one_runs() -> None:
    runner = CliRunner()
    shown = runner.invoke(cli, ["--help"])
    assert shown.exit_code == 0 and all(f"  {name} " in shown.output for name in COMMAND_MODULES), shown.output
    nested = runner.invoke(cli, ["runs", "journal", "--help"])  # journal_cmds' commands join `runs` on load
    assert nested.exit_code == 0 and "journal" in nested.output


def test_the_console_script_is_callable_after_the_group_is_imported() -> None:
    """The crash suite's fork server imports telo.cli.main ahead of time and then calls the console script: with the
    script at ``telo.cli:main`` the submodule shadowed the package's function and every child called a module."""
    import tomllib
    from pathlib import Path

    import telo.cli.main  # noqa: F401  (imported first, as the fork server does)

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    module_name, _, attribute = pyproject["project"]["scripts"]["telo"].partition(":")
    assert callable(getattr(importlib.import_module(module_name), attribute))
