"""telo.kinds.cron: where ticks fall — cron expressions in a time zone across DST transitions (the rules in the
module docstring), macros, intervals, and what a bad expression or zone says."""

from __future__ import annotations

import datetime

import pytest

from telo.errors import Code, TeloError
from telo.kinds.cron import CronTicks, IntervalTicks, between, local_text, tick_text


def ms(text: str) -> int:
    return int(datetime.datetime.fromisoformat(text).timestamp() * 1000)


def local_ticks(expression: str, zone: str, start: str, end: str) -> list[str]:
    ticks = CronTicks(expression, zone, "test")
    return [local_text(t, zone) for t in between(ticks, ms(start), ms(end), 100)]


# Europe/Berlin: 2026-03-29 02:00 -> 03:00 (spring forward), 2026-10-25 03:00 -> 02:00 (fall back).
def test_a_fixed_time_in_the_skipped_hour_fires_once_right_after_the_gap() -> None:
    got = local_ticks("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00+01:00", "2026-03-30T12:00:00+02:00")
    assert got == ["2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]


def test_a_fixed_time_in_the_repeated_hour_fires_once_at_its_first_occurrence() -> None:
    got = local_ticks("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00+02:00", "2026-10-26T12:00:00+01:00")
    assert got == ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]


def test_an_hourly_expression_follows_the_real_clock() -> None:
    spring = local_ticks("0 * * * *", "Europe/Berlin", "2026-03-29T00:30:00+01:00", "2026-03-29T04:30:00+02:00")
    assert spring == ["2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"]
    fall = local_ticks("0 * * * *", "Europe/Berlin", "2026-10-25T00:30:00+02:00", "2026-10-25T03:30:00+01:00")
    assert fall == ["2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00",
                    "2026-10-25T03:00:00+01:00"]


def test_new_york_spring_forward_too() -> None:  # 2026-03-08 02:00 -> 03:00
    got = local_ticks("15 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00", "2026-03-09T12:00:00-04:00")
    assert got == ["2026-03-08T03:00:00-04:00", "2026-03-09T02:15:00-04:00"]


def test_seconds_and_macros() -> None:
    every5s = CronTicks("*/5 * * * * *", "UTC", "test")
    assert every5s.after(ms("2026-01-01T00:00:00+00:00")) == ms("2026-01-01T00:00:05+00:00")
    daily = CronTicks("@daily", "UTC", "test")
    assert daily.after(ms("2026-01-01T10:00:00+00:00")) == ms("2026-01-02T00:00:00+00:00")
    assert CronTicks("@HOURLY", "UTC", "test").after(ms("2026-01-01T10:00:00+00:00")) == ms("2026-01-01T11:00:00Z")


def test_after_is_strict() -> None:
    ticks = CronTicks("*/5 * * * *", "UTC", "test")
    assert ticks.after(ms("2026-01-01T00:05:00+00:00")) == ms("2026-01-01T00:10:00+00:00")
    assert ticks.after(ms("2026-01-01T00:05:00+00:00") - 1) == ms("2026-01-01T00:05:00+00:00")


@pytest.mark.parametrize("expression", ["61 * * * *", "nonsense", "0 0 30 2 *", "* * *"])
def test_a_bad_expression_says_where_and_how_to_write_one(expression: str) -> None:
    with pytest.raises(TeloError) as caught:
        CronTicks(expression, "UTC", "Scheduler.Cron 'nightly'.cron")
    assert caught.value.code == Code.MANIFEST_VALIDATION_FAILED
    assert "Scheduler.Cron 'nightly'.cron" in caught.value.message and expression in caught.value.message
    assert caught.value.hint and "five fields" in caught.value.hint


def test_an_unknown_zone_is_refused() -> None:
    with pytest.raises(TeloError) as caught:
        CronTicks("0 * * * *", "Mars/Olympus", "Scheduler.Cron 'x'.timezone")
    assert caught.value.code == Code.MANIFEST_VALIDATION_FAILED and "Mars/Olympus" in caught.value.message


def test_interval_ticks_count_from_the_anchor() -> None:
    ticks = IntervalTicks(30_000, 1_000_000, "30s")
    assert ticks.after(0) == 1_030_000
    assert ticks.after(1_000_000) == 1_030_000
    assert ticks.after(1_030_000) == 1_060_000
    assert list(between(ticks, 1_000_000, 1_100_000, 10)) == [1_030_000, 1_060_000, 1_090_000]
    assert list(between(ticks, 1_000_000, 10_000_000, 2)) == [1_030_000, 1_060_000]


def test_tick_text() -> None:
    assert tick_text(ms("2026-12-02T17:00:00+00:00")) == "2026-12-02T17:00:00Z"
    assert tick_text(ms("2026-12-02T17:00:00+00:00") + 250) == "2026-12-02T17:00:00.250Z"


def test_a_star_in_the_minute_field_follows_the_real_clock_and_fixed_times_collapse() -> None:
    """The rules as docs/schedules.md states them (a review found the docs promising more than cronsim does)."""
    assert local_ticks("*/30 2 * * *", "Europe/Berlin", "2026-03-29T00:30:00+01:00", "2026-03-29T04:30:00+02:00") == []
    assert local_ticks("*/30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00+02:00", "2026-10-25T04:30:00+01:00") == [
        "2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00",
        "2026-10-25T02:30:00+01:00"]
    assert local_ticks("0,30 2 * * *", "Europe/Berlin", "2026-03-29T00:30:00+01:00",
                       "2026-03-29T04:30:00+02:00") == ["2026-03-29T03:00:00+02:00"]
