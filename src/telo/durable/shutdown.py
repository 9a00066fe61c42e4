"""Graceful shutdown of a process executing durable runs: ``telo run`` and ``telo worker`` on SIGTERM/SIGINT.

An ordinary stop — a deploy, Ctrl-C, a supervisor's SIGTERM — must not turn the effects in flight into
operator tasks (issue 12, case 5: Ctrl-C used to wait for a 3 s charge and then exit without its receipt;
SIGTERM killed a worker at once). On the first signal the process *drains*:

- no execution starts another step's effect: at its next step each halts (``ERR_DURABLE_SHUTTING_DOWN``,
  :class:`telo.engine.suspend.ExecutionHalted`), leaving its run ``running``, and releases its claim, so another
  worker takes the run over at once instead of waiting out the lease;
- an effect already running finishes, and its receipt is written, within the grace period (``--grace``,
  30 s by default);
- resumers stop sweeping; a process waiting in-process for a durable sleep stops waiting (the park is
  journaled: a worker continues it when it is due).

The process then exits with 128 + the signal's number (143 for SIGTERM, 130 for SIGINT). A second signal, or
the end of the grace period, stops it at once with the same code — the crash path: an effect still running
then has an intent and no receipt, which recovery treats as unconfirmed (docs/guarantees.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import ClassVar, Final

from telo.errors import Code, DurableError

ERR_DURABLE_SHUTTING_DOWN: Final = Code.DURABLE_SHUTTING_DOWN
DEFAULT_GRACE_S: Final = 30.0
SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


class ShuttingDown(DurableError):
    """The process is draining: this execution starts no further effect and leaves its run for another."""

    default_code = ERR_DURABLE_SHUTTING_DOWN


class _State:
    signum: int | None = None  # the first signal received, once draining
    listeners: ClassVar[list[Callable[[], None]]] = []


def draining() -> bool:
    return _State.signum is not None


def on_drain(listener: Callable[[], None]) -> Callable[[], None]:
    """Call ``listener()`` (on the loop's thread) when draining begins; returns a function that unsubscribes."""
    _State.listeners.append(listener)

    def unsubscribe() -> None:
        with contextlib.suppress(ValueError):
            _State.listeners.remove(listener)

    return unsubscribe


def refusal(run: str, path: str) -> ShuttingDown:
    return ShuttingDown(
        f"the process is shutting down (signal {_State.signum}): run {run!r} stops before the step at {path!r} "
        "and its claim is released",
        hint="the run continues in another worker (`telo worker`), or when you run it again",
        data={"run": run, "path": path, "signal": _State.signum},
    )


def request(signum: int) -> None:
    """Begin draining (the first signal); tell every listener."""
    if _State.signum is not None:
        return
    _State.signum = signum
    for listener in list(_State.listeners):
        listener()


def reset() -> None:
    """Forget a drain (tests running several applications in one process)."""
    _State.signum = None


async def _stopped(stopping: asyncio.Event) -> int:
    await stopping.wait()
    return 0


def _exit_now(signum: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + signum)


def _say(text: str) -> None:
    print(f"telo: {text}", file=sys.stderr, flush=True)


async def run_draining(main: Awaitable[int], *, grace_s: float = DEFAULT_GRACE_S) -> int:
    """Run ``main`` (an application's main coroutine) with SIGTERM/SIGINT draining it (module docstring);
    its exit code, or 128 + the signal's number once a signal arrived."""
    loop = asyncio.get_running_loop()
    task: asyncio.Future[int] = asyncio.ensure_future(main)
    stopping = asyncio.Event()

    def on_signal(signum: int) -> None:
        if draining():
            _say(f"second signal ({signal.Signals(signum).name}): stopping at once")
            _exit_now(_State.signum or signum)
        _say(f"{signal.Signals(signum).name} received: finishing the effects in flight and writing their receipts "
             f"(grace {grace_s:g} s), starting nothing new; a second signal stops at once")
        request(signum)
        stopping.set()

    installed: list[signal.Signals] = []
    for sig in SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
            loop.add_signal_handler(sig, on_signal, sig)
            installed.append(sig)
    try:
        waiter: asyncio.Future[int] = asyncio.ensure_future(_stopped(stopping))
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if not stopping.is_set():
            return task.result()
        done, _ = await asyncio.wait([task], timeout=grace_s)
        signum = _State.signum or int(signal.SIGTERM)
        if not done:
            _say(f"the grace period of {grace_s:g} s ended with effects still running: stopping at once")
            _exit_now(signum)
        task.result()  # the application's own error, if it raised one while draining
        _say("stopped: every execution of this process wrote what it finished and released its claim")
        return 128 + signum
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
