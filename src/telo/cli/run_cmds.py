"""``telo run``, ``telo check``, ``telo test`` (issue: manifests, CEL and the step engine)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import click

from telo.cli.common import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_USAGE,
    ManifestPath,
    grace_option,
    journal_compat_option,
    print_diagnostics,
    report_error,
)
from telo.cli.progress import MODES as PROGRESS_MODES
from telo.clock import SYSTEM_CLOCK
from telo.errors import Code, TeloError

if TYPE_CHECKING:
    from telo.runtime.app import Application

# A configuration telo refused (nothing ran) is exit 3, as an invalid manifest; a failure of what ran, 1.
CONFIGURATION_REFUSED = frozenset({c for c in Code if c.name.startswith("MANIFEST_")} | {Code.JOURNAL_CONFIG_INVALID}
                                  | {Code.PYTHON_FUNCTION_NOT_FOUND, Code.PYTHON_FUNCTION_INVALID})


@click.command("run")
@click.argument("manifest", type=ManifestPath())
@click.option("--input", "inputs", multiple=True, metavar="KEY=VALUE",
              help="An input for the targets: text, unless the workflow it reaches declares its type.")
@click.option("--input-json", "json_inputs", multiple=True, metavar="KEY=JSON", help="An input given as JSON.")
@click.option("--json", "as_json", is_flag=True, help="Print the targets' results as JSON.")
@click.option("--progress", "progress", type=click.Choice(PROGRESS_MODES), default="auto",
              show_default=True, help="Durable steps as they run, on stderr: a live view (auto: when stderr is "
              "a terminal), plain lines, or off.")
@click.option("--exit-on", "exit_on", type=click.Choice(["runs", "targets"]), default="runs", show_default=True,
              help="runs: the exit code says how the durable runs ended (1 failed or cancelled, 4 not settled); "
              "targets: the targets' outcome alone, as upstream (a run is detached).")
@grace_option
@journal_compat_option
def run_command(manifest: str, inputs: tuple[str, ...], json_inputs: tuple[str, ...], as_json: bool, progress: str,
                exit_on: str, grace: float) -> None:
    """Run a manifest's targets; durable runs it starts are awaited until they settle or park, and each one's
    outcome is printed (docs/cli.md "telo run")."""
    from telo.cli import run_outcome
    from telo.cli.progress import watching
    from telo.durable.shutdown import run_draining
    from telo.kinds.controllers import load_application
    from telo.manifest import ManifestLoadError
    from telo.operations.command_inputs import command_inputs, target_typing

    try:
        app = load_application(manifest)
    except ManifestLoadError as exc:
        print_diagnostics(exc.diagnostics)
        click.echo(f"error: {exc.code}: {manifest} has {len(exc.diagnostics)} problem(s); nothing was run", err=True)
        sys.exit(EXIT_ERROR)
    try:
        app.inputs = command_inputs(inputs, json_inputs, target_typing(app))
    except TeloError as exc:
        sys.exit(report_error(exc))
    try:
        with run_outcome.stdout_to_stderr(as_json), watching(app, progress):
            code = asyncio.run(run_draining(app.main(), grace_s=grace))
    except TeloError as exc:
        if app.failed_attach(exc) is not None:  # the run's own failure, raised as upstream does: report it
            _report(app, manifest, as_json)
            sys.exit(EXIT_FAILED)
        if exc.code in (Code.PYTHON_FUNCTION_NOT_FOUND, Code.PYTHON_FUNCTION_INVALID) and _function_problems(app):
            click.echo(f"error: {exc.code}: {manifest} names a Python function that does not import; nothing was "
                       "run", err=True)
            sys.exit(EXIT_ERROR)
        report_error(exc)
        # A configuration telo refused (nothing ran) is exit 3, as an invalid manifest; inputs a target's
        # inputType refused, 2 (usage); a failure of what ran, 1.
        sys.exit(EXIT_USAGE if exc.code == Code.INPUT_INVALID
                 else EXIT_ERROR if exc.code in CONFIGURATION_REFUSED else EXIT_FAILED)
    _report(app, manifest, as_json)
    sys.exit(code if exit_on == "targets" else run_outcome.exit_code(app.outcomes, code))


@click.command("check")
@click.argument("manifests", nargs=-1, required=True, type=ManifestPath())
@click.option("--json", "as_json", is_flag=True, help="Print diagnostics as JSON.")
def check_command(manifests: tuple[str, ...], as_json: bool) -> None:
    """Load and statically check manifests; print every diagnostic with its file:line:col."""
    from telo.analysis import check
    from telo.kinds.python import function_checks
    from telo.operations.gates import gate_checks

    all_diags = []
    for m in manifests:
        all_diags.extend(check(m, extra=lambda loaded: [*function_checks(loaded), *gate_checks(loaded)]))
    errors = [d for d in all_diags if d.severity == "error"]
    if as_json:
        click.echo(json.dumps([d.to_dict() for d in all_diags], ensure_ascii=False))
    else:
        for d in all_diags:
            click.echo(str(d))
        click.echo(f"{len(errors)} error(s), {len(all_diags) - len(errors)} warning(s) in {len(manifests)} manifest(s)")
    sys.exit(EXIT_FAILED if errors else 0)


def discover(paths: Sequence[str]) -> list[Path]:
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found.extend(sorted(x for x in p.rglob("*.yaml") if "__fixtures__" not in x.parts))
        else:
            found.append(p)
    return found


def _run_one(manifest: Path, timeout: float) -> tuple[Path, int, str, float]:
    start = SYSTEM_CLOCK.monotonic()
    env: dict[str, str] = {}
    for name in (".env", ".env.local"):  # reference §14: .env, then .env.local, then the host environment,
        env_file = manifest.parent / name  # later sources overriding earlier ones
        if env_file.is_file():
            for line in env_file.read_text().splitlines():
                k, sep, v = line.partition("=")
                if sep and k.strip() and not line.lstrip().startswith("#"):
                    env[k.strip()] = v.strip()
    env.update(os.environ)
    try:
        # A scenario may fail or park runs on purpose: it passes on its targets' outcome (upstream's rule).
        proc = subprocess.run([sys.executable, "-m", "telo", "run", str(manifest), "--exit-on", "targets"],
                              capture_output=True, text=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL)
        return manifest, proc.returncode, proc.stdout + proc.stderr, SYSTEM_CLOCK.monotonic() - start
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return manifest, -1, out + f"\n(timed out after {timeout:g} s)", SYSTEM_CLOCK.monotonic() - start


def _report(app: Application, manifest: str, as_json: bool) -> None:
    """Each durable run's outcome: a line a run, or (--json) the targets' answers carrying them."""
    from telo.cli import run_outcome

    run_outcome.report_problems(app.outcomes)
    if as_json:
        click.echo(json.dumps(run_outcome.settled_answers(app.target_results, app.outcomes), ensure_ascii=False))
    else:
        run_outcome.report(app.outcomes, manifest)


def _function_problems(app: Application) -> bool:
    """Print, as ``telo check`` does — each at its position in the manifest — the Python functions of ``app``
    that do not import (its start failed on one); False if none is found that way."""
    from telo.kinds.python import function_checks

    found = function_checks(app.manifest)
    print_diagnostics(found)
    return bool(found)


@click.command("test")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--concurrency", default=3, show_default=True, help="Manifests run at once.")
@click.option("--filter", "filter_", default=None, help="Only manifests whose path contains this text.")
@click.option("--timeout", default=120.0, show_default=True, help="Seconds before a manifest counts as failed.")
@journal_compat_option
def test_command(paths: tuple[str, ...], concurrency: int, filter_: str | None, timeout: float) -> None:
    """Run each test manifest in a fresh child process; a manifest passes iff it exits 0."""
    manifests = [m for m in discover(paths) if filter_ is None or filter_ in str(m)]
    passed = failed = 0
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for manifest, code, output, seconds in pool.map(lambda m: _run_one(m, timeout), manifests):
            if code == 0:
                passed += 1
                click.echo(f"PASS {manifest} ({seconds:.1f} s)")
            else:
                failed += 1
                click.echo(f"FAIL {manifest} (exit {code}, {seconds:.1f} s)")
                click.echo("\n".join("    " + line for line in output.rstrip().splitlines()[-30:]))
    click.echo(f"{passed} passed, {failed} failed")
    sys.exit(EXIT_FAILED if failed or not manifests else 0)


COMMANDS = [run_command, check_command, test_command]
