"""telo.durable.operator.unconfirmed_step: the step `telo resolve` answers, from where the run parked."""
from __future__ import annotations

from telo.durable.operator import unconfirmed_step


def test_the_park_of_an_unconfirmed_effect_names_its_step() -> None:
    assert unconfirmed_step("steps/first/@unconfirmed[0]") == "steps/first"
    assert unconfirmed_step("steps/loop[2]/w/@unconfirmed[3]") == "steps/loop[2]/w"


def test_a_restored_runs_park_names_the_logical_step() -> None:
    assert unconfirmed_step("@epoch[1]/steps/first/@unconfirmed[0]") == "steps/first"


def test_other_parks_name_none() -> None:
    assert unconfirmed_step("steps/gate") is None
    assert unconfirmed_step("@epoch[2]/steps/gate") is None
