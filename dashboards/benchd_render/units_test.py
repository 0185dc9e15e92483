"""Grafana's formats for the units the dashboards use (pytest)."""
import math

import pytest

from benchd_render.units import format_value, number, scale


@pytest.mark.parametrize("value,text", [(0, "0"), (1.234, "1.23"), (12.345, "12.3"), (123.4, "123"),
                                        (1234.6, "1235"), (0.012345, "0.0123"), (-2.5, "-2.5")])
def test_number_keeps_three_significant_digits(value, text):
    assert number(value) == text


@pytest.mark.parametrize("unit,value,text", [
    ("s", 0.0125, "12.5 ms"), ("s", 3.2e-5, "32 µs"), ("s", 2, "2 s"), ("s", 90, "1.5 min"),
    ("s", 7200, "2 hour"), ("s", 0, "0 s"),
    ("bytes", 1536, "1.5 KiB"), ("bytes", 80 * 2**30, "80 GiB"), ("bytes", 512, "512 B"),
    ("Bps", 3.2e9, "3.2 GB/s"), ("Bps", 950, "950 B/s"),
    ("flops", 4.12e13, "41.2 TFLOP/s"), ("ops", 0.05, "0.05 ops/s"), ("ops", 2500, "2.5 K ops/s"),
    ("short", 12345, "12.3 K"), ("short", 2.5e6, "2.5 Mil"), ("short", 0.5, "0.5"),
    ("percentunit", 0.85, "85%"), ("percentunit", 1.104, "110%"),
    ("bool_yes_no", 1, "Yes"), ("bool_yes_no", 0, "No"), ("none", 3, "3")])
def test_units_read_as_in_grafana(unit, value, text):
    assert format_value(unit, value) == text


def test_missing_values_are_blank_and_unknown_units_refused():
    assert format_value("bytes", math.nan) == ""
    assert format_value("s", None) == ""
    with pytest.raises(ValueError, match="unit 'decbytes'"):
        format_value("decbytes", 1)


@pytest.mark.parametrize("unit,value,divisor", [
    ("bytes", 20 * 2**30, 2**30), ("bytes", 100, 1), ("s", 0.004, 1e-3), ("s", 120, 60),
    ("Bps", 1.6e8, 1e6), ("flops", 3e13, 1e12), ("ops", 0.004, 1), ("short", 4e4, 1e3),
    ("percentunit", 0.5, 1), ("none", 1e9, 1), ("bytes", 0, 1)])
def test_axes_scale_as_their_labels(unit, value, divisor):
    assert scale(unit, value) == divisor
