"""The kind reference (docs/kinds/*.md), generated from the kind specs themselves (issue 15).

Every field's row comes from its schema — type, required, default, unit (``x-telo-unit``), whether it may be
CEL (``x-telo-eval``), the names its steps see (``x-telo-scope``) and its ``description`` — and every kind's
text and example from its :class:`~telo.specs.model.KindSpec`, so the pages cannot drift from what the loader
enforces: tests/unit/test_kind_reference.py regenerates them and fails when the files differ. Regenerate with::

    python -m telo.specs.reference            # writes docs/kinds/ of this checkout
    python -m telo.specs.reference --check    # exits 1 when a page is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .common import DURATION_PATTERN
from .events import KERNEL_EVENTS
from .model import KindSpec, ModuleSpec
from .registry import user_modules
from .steps import RETRY, STEP_KINDS, STEP_SCHEMAS, TARGET_STEP
from .tables import BUILTIN_MODULES, TELO

COMMAND = "python -m telo.specs.reference"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "kinds"
_HEADER = f"<!-- Generated from src/telo/specs by `{COMMAND}`: edit the specs, not this file. -->\n\n"
_EVAL = {"runtime": "per call", "compile": "at load"}


def modules() -> list[ModuleSpec]:
    """The modules the reference covers: every built-in module, then ``Telo`` (imported by no one)."""
    user = user_modules()  # modules @telo.kind registered in this process join the table: not built in
    return [*(m for m in BUILTIN_MODULES.values() if m.import_name not in user), TELO]


def render_all() -> dict[str, str]:
    """Every page by file name (``durable-local.md``, ``steps.md``, ``index.md``)."""
    pages = {f"{m.import_name}.md": render_module(m) for m in modules()}
    pages["steps.md"] = render_steps()
    pages["index.md"] = render_index()
    return pages


# --- one module -----------------------------------------------------------------------------------------------


def render_module(spec: ModuleSpec) -> str:
    if spec.import_name == "telo":
        intro = ("# Module `Telo`\n\nThe `Telo.*` kinds need no import. Their canonical names are what the builder "
                 "(`telo.builder.resource(\"Telo.JsonSchema\", …)`) and reports use.\n")
    else:
        intro = (f"# Module `{spec.import_name}` (`{spec.canonical}`)\n\n"
                 f"Import it under any alias — `imports: {{ {spec.canonical}: {spec.import_name} }}` — and write its "
                 f"kinds `<alias>.<Kind>`. Journals, events, reports and the builder (`telo.builder`) use the "
                 f"canonical name `{spec.canonical}.<Kind>`, as the examples below do.\n")
    kinds = sorted(spec.kinds.values(), key=lambda k: (k.abstract, list(spec.kinds).index(k.name)))
    toc = ", ".join(f"[`{k.name}`](#{_anchor(k.canonical)})" for k in kinds)
    parts = [_HEADER + intro, f"Kinds: {toc}.\n\nThe step grammar (`steps:` lists) is in [steps.md](steps.md); "
                              "durations and CEL columns are explained in [index.md](index.md).\n"]
    parts.extend(render_kind(k) for k in kinds)
    if spec.import_name == "assert":
        parts.append(render_events())
    return "\n".join(parts)


def render_kind(kind: KindSpec) -> str:
    out = [f"## `{kind.canonical}`\n"]
    if kind.description:
        out.append(f"{kind.description}\n")
    facts = [f"capability: {', '.join(sorted(kind.capabilities))}"]
    if kind.extends:
        facts.append(f"extends `{kind.extends}`")
    if kind.abstract:
        facts.append("abstract: not declared itself, a slot typed with it takes the kinds that extend it")
    out.append(f"*{'; '.join(facts)}*\n")
    config = _table(kind.schema)
    if config:
        out.extend(["Configuration:\n", config, _alternatives(kind.schema)])
    elif not kind.abstract:
        out.append("No configuration fields.\n")
    if kind.input_schema:
        out.extend(["Inputs (of each call):\n", _table(kind.input_schema)])
    if kind.example:
        out.append(f"```yaml\n{kind.example.rstrip()}\n```\n")
    return "\n".join(part for part in out if part)


def _alternatives(schema: Mapping[str, Any]) -> str:
    """``oneOf``/``anyOf`` of required-only branches (Sleep ``for``|``until``, Loop's bounds) as a sentence."""
    lines = []
    for key, word in (("oneOf", "exactly one"), ("anyOf", "at least one")):
        branches = schema.get(key) or []
        names = [b["required"][0] for b in branches if isinstance(b, Mapping) and len(b.get("required", [])) == 1]
        if names:
            lines.append(f"Give {word} of {' or '.join(f'`{n}`' for n in names)}.\n")
    return "\n".join(lines)


def _table(schema: Mapping[str, Any], *, skip: tuple[str, ...] = ()) -> str:
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    rows = ["| field | type | required | default | unit | CEL | description |",
            "|---|---|---|---|---|---|---|"]
    for name, sub in properties.items():
        if name in skip or not isinstance(sub, Mapping):
            continue
        rows.append("| " + " | ".join([
            f"`{name}`", type_of(sub), "yes" if name in required else "", _default(sub),
            str(sub.get("x-telo-unit", "")), _EVAL.get(sub.get("x-telo-eval", ""), ""), _describe(sub),
        ]) + " |")
    return "\n".join(rows) + "\n" if len(rows) > 2 else ""


def type_of(schema: Mapping[str, Any]) -> str:
    """A field's type in words: ``reference to `Telo.Type```, ``steps``, ``number or duration`` …"""
    if "x-telo-ref" in schema:
        wanted = schema["x-telo-ref"]
        return "reference (any kind)" if wanted == "*" else f"reference to `{wanted}`"
    if schema.get("x-telo-steps"):
        return "steps"
    if "enum" in schema:
        return " \\| ".join(f"`{_json(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{_json(schema['const'])}`"
    raw = schema.get("type")
    types = [raw] if isinstance(raw, str) else list(raw or [])
    if schema.get("pattern") == DURATION_PATTERN:
        return "number or duration" if "number" in types else "duration"
    words = []
    for name in types:
        if name == "array":
            items = schema.get("items")
            inner = type_of(items) if isinstance(items, Mapping) and items else "any"
            words.append(f"list of {inner}")
        else:
            words.append({"object": "mapping", "boolean": "boolean"}.get(name, name))
    return " or ".join(words) if words else "any"


def _default(schema: Mapping[str, Any]) -> str:
    return f"`{_json(schema['default'])}`" if "default" in schema else ""


def _describe(schema: Mapping[str, Any]) -> str:
    text = str(schema.get("description", ""))
    scope = schema.get("x-telo-scope")
    if scope:
        text += f" Sees {', '.join(f'`{n}`' for n in scope)}."
    examples = schema.get("examples")
    if examples:
        text += f" E.g. {', '.join(f'`{_json(e)}`' for e in examples)}."
    if schema.get("deprecated"):
        text = "**Deprecated.** " + text
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _anchor(title: str) -> str:
    """GitHub's heading anchor of ``## `Run.Sequence` `` (punctuation dropped, lower case)."""
    return "".join(c for c in title.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


# --- the step grammar, the events, the index -----------------------------------------------------------------


def render_steps() -> str:
    out = [_HEADER + "# The step grammar\n",
           "A step list (`steps:` of `Run.Sequence`, `DurableLocal.Workflow` …; `then`, `do`, `cases`, `try` … "
           "inside steps) holds steps of these kinds. A step has a `name` and exactly one of the keys "
           f"{', '.join(f'`{k}`' for k in STEP_KINDS)}; the first present decides its kind. Every step also "
           "takes `when` (skipped unless true). Its result is `steps.<name>.result`. A field a step does not "
           "have is refused at load, with the field it probably meant.\n",
           "Durations: `timeout`, `initialDelay` and `maxDelay` take a number of milliseconds or a duration "
           "string — `timeout: 1500` and `timeout: 1.5s` are the same (units `ms`, `s`, `m`, `h`, `d`; one "
           "number and one unit). Anything else, such as `1 sec`, is refused at load at its line.\n"]
    for kind in STEP_KINDS:
        out.append(f"## `{kind}` step\n")
        out.append(_table(STEP_SCHEMAS[kind]))
    out.append("## `retry`\n")
    out.append(f"{RETRY['description']}\n")
    out.append(_table(RETRY))
    out.append("```yaml\n- name: charge\n  invoke: !ref chargeCard\n  inputs: { order: !cel \"inputs.order\" }\n"
               "  retry: { attempts: 2, initialDelay: 200ms, factor: 2, jitter: none }   # up to 3 calls: "
               "after 200 ms, 400 ms\n  timeout: 5s                                                       "
               "# each attempt\n```\n")
    out.append("## Boot targets\n\nAn inline entry of `Telo.Application.targets` is an `invoke` step whose "
               "`name` is optional:\n")
    out.append(_table(TARGET_STEP))
    return "\n".join(out)


def render_events() -> str:
    rows = ["| event | emitted by | when | payload |", "|---|---|---|---|"]
    rows += [f"| `<resource>.{e.name}` | {e.emitted_by} | {e.when} | {e.payload} |" for e in KERNEL_EVENTS]
    return ("## Events\n\nWhat `Assert.Events` sees: kernel events named `<resource>.<Event>` after the resource "
            "that emits them (`chargeCard.Invoked`, `order.RunCompleted`). A pattern matches segment by segment, "
            "`*` matching any one (`*.InvokeRejected`, `chargeCard.*`).\n\n" + "\n".join(rows) + "\n")


def render_index() -> str:
    rows = ["| module (import name) | canonical name | kinds |", "|---|---|---|"]
    for m in modules():
        kinds = ", ".join(f"`{k}`" for k in m.kinds)
        name = "— (no import)" if m.import_name == "telo" else f"`{m.import_name}`"
        rows.append(f"| [{name}]({m.import_name}.md) | `{m.canonical}` | {kinds} |")
    return (_HEADER + "# Kind reference\n\nOne page per built-in module: every kind, every field (its type, "
            "whether it is required, its default and unit, whether it may be CEL) and an example. Import a module by "
            "its import name under any alias; journals, events, reports and the builder use its canonical name.\n\n"
            + "\n".join(rows) + "\n\n"
            "- The step grammar (`invoke`, `retry`, `timeout`, `if`, `while` …): [steps.md](steps.md).\n"
            "- The events `Assert.Events` sees: [assert.md](assert.md#events).\n\n"
            "Columns: **CEL** says whether the field may be a `!cel` expression, evaluated *per call* (against the "
            "call's `inputs` and the module scope) or once *at load* (module scope only). **unit** `ms`: a number "
            "of milliseconds — or a duration string (`250ms`, `1.5s`, `2m`, `1h`, `1d`), which these fields accept "
            "too. A *duration* field takes the string only.\n")


# --- the command ------------------------------------------------------------------------------------------------


def stale(directory: Path) -> list[str]:
    """The pages under ``directory`` that differ from what the specs produce (missing ones included), and
    generated pages there that the specs no longer produce."""
    pages = render_all()
    out = [name for name, text in pages.items()
           if not (directory / name).is_file() or (directory / name).read_text(encoding="utf-8") != text]
    if directory.is_dir():
        out += [p.name for p in sorted(directory.glob("*.md")) if p.name not in pages]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Generate docs/kinds/*.md from the kind specs.")
    parser.add_argument("--out", type=Path, default=DOCS, help="the directory to write (default: docs/kinds)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is out of date")
    args = parser.parse_args(argv)
    if args.check:
        behind = stale(args.out)
        for name in behind:
            print(f"{args.out / name}: out of date (run `{COMMAND}`)", file=sys.stderr)
        return 1 if behind else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (args.out / name).write_text(text, encoding="utf-8")
    for name in stale(args.out):  # pages of modules that are gone
        (args.out / name).unlink()
    print(f"wrote {len(render_all())} pages to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
