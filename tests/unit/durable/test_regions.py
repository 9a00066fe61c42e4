"""RegionReports (spec §8.3): each region an execution enters is reported, and counted, once."""

from __future__ import annotations

import gc

from telo.durable.regions import RegionReports
from telo.engine.zones import ATOMIC, Zone, ZoneReport


def test_regions_entered_one_after_another_are_each_counted() -> None:
    """A region's zone is dropped when the region ends, and CPython gives the next one the same id(): keyed by id
    alone, the second collapsed transaction read as "reported already" (a scenario counted 1 or 2 run to run)."""
    regions = RegionReports("r")
    for _ in range(5):
        zone = Zone("Sql.Transaction", {ATOMIC: "atomic"}, resource="tx")
        regions.report(ZoneReport(zone, ATOMIC, "collapsed"))
        regions.report(ZoneReport(zone, ATOMIC, "collapsed"))  # a second site in the same region: not again
        del zone
        gc.collect()
    assert regions.collapsed == 5 and len(regions.reasons) == 5


def test_a_reported_region_is_not_kept_alive() -> None:
    """Holding every reported zone kept each transaction's connection object until the execution ended."""
    import weakref

    regions = RegionReports("r")

    class Transaction:  # stands for the open driver transaction a Sql.Transaction zone carries
        pass

    tx = Transaction()
    gone = weakref.ref(tx)
    regions.report(ZoneReport(Zone("Sql.Transaction", {ATOMIC: "atomic"}, transaction=tx), ATOMIC, "collapsed"))
    del tx
    gc.collect()
    assert gone() is None and regions.collapsed == 1
