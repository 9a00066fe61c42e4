"""Effects whose outcome is unknown after a crash (event-log spec §2; telo.durable.effects for the journal
records): what a resumed run does when it reaches a step with an intent and no receipt.

The decision — a ``lookup`` hook's answer, an operator's (``telo resolve``), or the target's policy — is
recorded once at ``<step>/@unconfirmed[n]`` before it is acted on, so a crash while acting on it resolves the
same way; a redrive is marked started first, so an interrupted redrive is asked about again.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, Protocol

from telo import paths
from telo.durable import effects, shutdown
from telo.engine.context import ON_UNCONFIRMED, current
from telo.engine.dispatch import EventBus
from telo.engine.suspend import ParkUntil, ParkWhere
from telo.errors import Code, DurableError
from telo.journal.model import Entry

log = logging.getLogger("telo.durable")


class EffectUnconfirmed(DurableError):
    """An effect's outcome is unknown and its policy is ``fail`` (or an operator answered ``--fail``)."""

    default_code = Code.DURABLE_EFFECT_UNCONFIRMED


class _Handle(Protocol):
    """What resolving needs of the run handle (telo.durable.handle.LocalRunHandle)."""

    run_id: str
    key_run: str  # whose id the effects' idempotency keys carry (a fork may keep its source's)
    entries: dict[str, Entry]
    events: EventBus | None  # the application's: told each resolution (``<target>.InvokeUnconfirmed``)
    started: set[str]  # steps whose effect this execution began

    def policy(self, target: Mapping[str, str] | None) -> effects.EffectPolicy: ...

    async def park(self, where: ParkWhere, until: ParkUntil) -> NoReturn: ...

    async def decide(self, path: str, kind: str, compute: Callable[[], Any], *, wait: bool = False) -> Any: ...


async def resolve(handle: _Handle, path: str, target: Mapping[str, str] | None,
                  state: effects.EffectState) -> tuple[Any] | None:
    """Decide — once, recorded — what to do with the effect at ``path`` whose outcome is unknown.

    Returns ``(value,)`` when the outcome is known without executing (a lookup found it, or an operator
    supplied it with ``--skip-with``), ``None`` to re-execute with the same idempotency key; raises
    ``ERR_DURABLE_EFFECT_UNCONFIRMED`` to fail, or parks for an operator."""
    run = handle.run_id
    where = effects.unconfirmed_path(path, state.resolution_index)
    key = f"{handle.key_run}/{path}"  # the key the effect was handed, which a lookup asks the outside about
    recorded = handle.entries.get(where)
    if recorded is not None:
        decision = recorded.decode(run)
    else:
        override = current().extra(ON_UNCONFIRMED)
        policy = handle.policy(target)
        mode = override or policy.mode
        if policy.lookup is not None:
            found = await policy.lookup(key)
            decision = ({"action": effects.REDRIVE, "by": "lookup", "found": False} if found is effects.NOT_FOUND
                        else {"action": "skip", "by": "lookup", "found": True, "value": found})
        elif mode == effects.PARK:
            name = target.get("name", "?") if target else "?"
            _tell(handle, path, target, {"action": effects.PARK, "by": "policy"})
            await handle.park(
                ParkWhere(where, name, f"unconfirmed effect: {name!r} at {path} may or may not have happened "
                          f"(idempotency key {key}); answer with `telo resolve {shlex.quote(run)} {shlex.quote(path)} "
                          "--redrive | --skip-with JSON | --fail`"),
                ParkUntil(),
            )
        else:
            decision = {"action": mode, "by": "policy"}
        decision = await handle.decide(where, "unconfirmed", lambda: decision, wait=True)
    _tell(handle, path, target, decision)
    log.info("durable.effect.unconfirmed", extra={"durable.run": run, "durable.path": path,
                                                  "durable.resolution": effects.describe_resolution(decision)})
    action = decision.get("action") if isinstance(decision, Mapping) else None
    if action == effects.REDRIVE:
        # Marked started BEFORE executing: if this redrive is interrupted too, the next recovery sees an
        # unknown outcome again and asks again, rather than redriving blindly on an old answer.
        n = state.resolution_index
        await handle.decide(paths.redrive_path(path, n), "redrive", lambda: {"resolution": n}, wait=True)
        return None
    if action == "skip":
        return (decision.get("value"),)
    by = decision.get("by") if isinstance(decision, Mapping) else None
    why = "an operator chose to fail it (telo resolve --fail)" if by == "operator" else \
        "its policy is to fail rather than repeat it"
    raise EffectUnconfirmed(
        f"the effect at {path!r} of run {run!r} may or may not have happened, and {why}",
        hint=f"inspect the outside system for idempotency key {key}; restore or fork the run to retry",
        data={"run": run, "path": path, "key": key},
    )


def _tell(handle: _Handle, path: str, target: Mapping[str, str] | None, decision: Any) -> None:
    """Emit ``<target>.InvokeUnconfirmed``: what was decided for the effect at ``path`` (the live progress view
    shows it; ``decision`` is what is recorded, or ``{action: park}`` before parking for an operator)."""
    events = handle.events
    if events is None or not events.active or not isinstance(decision, Mapping):
        return
    name = target.get("name", "?") if target else "?"
    ref = {"kind": target.get("kind", "?"), "name": name} if target else None
    events.emit(f"{name}.InvokeUnconfirmed", {
        "ref": ref, "run": handle.run_id, "path": path, "key": f"{handle.key_run}/{path}",
        "action": decision.get("action"), "by": decision.get("by"), "found": decision.get("found")})


async def stop_before_effect(handle: _Handle, path: str, guarded: bool) -> NoReturn:
    """A drain (telo.durable.shutdown) stops the execution before the effect at ``path`` starts. For an effect
    that must not repeat (``guarded``), whose intent is durable already, it first records that the effect did
    not run since its last start marker — a resolution ``{action: redrive, by: shutdown}`` — so that whoever
    continues the run executes it instead of parking it for an operator as an effect that may or may not have
    happened (docs/guarantees.md "Stopping a process"). Only when this execution knows it: not when it began
    this very effect earlier (a retried composite re-enters the same step; a timeout may have cut its first
    attempt short with its outcome unknown) — then the next execution asks, as after a crash."""
    if guarded and path not in handle.started:
        state = effects.effect_state(path, handle.entries, handle.run_id)
        if state.unconfirmed:
            await handle.decide(effects.unconfirmed_path(path, state.resolution_index), "unconfirmed",
                                lambda: {"action": effects.REDRIVE, "by": "shutdown"}, wait=True)
    raise shutdown.refusal(handle.run_id, path)
