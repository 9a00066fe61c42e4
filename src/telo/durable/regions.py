"""What an execution reports of its zoned regions (spec §8.3): one ``durable.zone.mode`` record per region —
collapsed (its steps not journaled one by one) or perStep, both at the same level — and, for the run's
outcome, how many collapsed and why."""

from __future__ import annotations

import logging
from typing import Any

from telo.engine.zones import ZoneReport

log = logging.getLogger("telo.durable")


class RegionReports:
    """The regions one execution of ``run`` entered, reported once each."""

    __slots__ = ("collapsed", "reasons", "reported", "run")

    def __init__(self, run: str) -> None:
        self.run = run
        self.collapsed = 0
        self.reasons: list[str] = []  # "<zone kind> (<attribute>): <its reason>" per collapsed region
        # The zones reported, by serial — not id(): a region's zone is dropped when the region ends, and CPython
        # hands the next region's zone the same id, which then read as "reported already" (two collapsed
        # transactions in a row counted as one, or not, by the allocator's whim); nor the zones themselves, which
        # hold their transaction and would pile up in a long loop of them.
        self.reported: set[int] = set()

    def report(self, report: ZoneReport) -> None:
        key = report.zone.serial
        if key in self.reported:
            return
        self.reported.add(key)
        attrs: dict[str, Any] = {
            "durable.run": self.run,
            "durable.zone": report.zone.kind,
            "durable.zone.attribute": report.attribute,
            "durable.zone.mode": report.mode,
        }
        if report.attestation:
            attrs["durable.zone.attestation"] = report.attestation
        log.info("durable.zone.mode", extra=attrs)
        if report.mode == "collapsed":
            self.collapsed += 1
            self.reasons.append(f"{report.zone.kind} ({report.attribute}): {report.zone.reason(report.attribute)}")
