"""telo.durable.parks: the park record of a fan-out whose branches park in one execution (spec §7.8)."""
from __future__ import annotations

from telo.durable.parks import merged
from telo.journal.model import Parked

AWAIT = Parked("steps/f[0]/a", "gate", "order-7", None)
RECEIVE = Parked("steps/f[1]/r", "take", "inbox:run:x", 5_000)
SLEEP = Parked("steps/f[2]/s", "nap", None, 9_000)


def test_the_first_park_of_an_execution_is_recorded_as_is() -> None:
    assert merged(None, RECEIVE) == RECEIVE


def test_an_awaits_token_and_path_stay_on_the_record_a_delivery_must_find() -> None:
    assert merged(AWAIT, RECEIVE) == Parked("steps/f[0]/a", "gate", "order-7", 5_000)
    assert merged(RECEIVE, AWAIT) == Parked("steps/f[0]/a", "gate", "order-7", 5_000)


def test_the_earliest_due_time_wins_and_a_park_without_one_does_not_erase_it() -> None:
    assert merged(SLEEP, RECEIVE).at == 5_000
    assert merged(RECEIVE, SLEEP) == Parked(SLEEP.path, SLEEP.resource, None, 5_000)
    assert merged(RECEIVE, Parked("steps/f[3]/r", "take", "inbox:run:y", None)).at == 5_000


def test_of_two_awaits_the_later_one_is_recorded_as_upstream_does() -> None:
    other = Parked("steps/f[4]/a", "gate", "order-8", None)
    assert merged(AWAIT, other) == other
