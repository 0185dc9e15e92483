"""Grafana's value formats for the units benchd's panels name
(fieldConfig.defaults.unit), so an axis or a big number reads as it does in
Grafana: "12.5 ms", "1.50 GiB", "85.0%", "3.20 GB/s", "41.2 TFLOP/s".

Grafana's own scales (packages/grafana-data/src/valueFormats): `s` steps
µs/ms/s/min/hour/day, `bytes` is IEC (1024), `Bps` and `flops` are SI (1000)
with prefixes down to nano, `short` and `ops` scale upwards only (K, Mil, Bil;
K, M, B ops/s), `percentunit` is a fraction shown in percent. An unknown unit is an error: a
new panel unit must be taught here, not drawn as a bare number.
"""
import math

SI_PREFIXES = ["n", "µ", "m", "", "k", "M", "G", "T", "P", "E"]
SI_ONE = SI_PREFIXES.index("")
IEC_PREFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
SHORT_SUFFIXES = ["", " K", " Mil", " Bil", " Tri", " Quadr"]
COUNT_SUFFIXES = ["", " K", " M", " B", " T"]
# (seconds in one, name) from the largest; below a millisecond: µs, ns.
TIME_STEPS = [(86400 * 7, "week"), (86400, "day"), (3600, "hour"), (60, "min"), (1, "s"),
              (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")]

UNITS = {"s", "bytes", "Bps", "flops", "ops", "short", "none", "percentunit", "bool_yes_no"}


def number(value):
    """Three significant digits, never an exponent: 1.23, 12.3, 123, 1234, 0.0123."""
    if value == 0:
        return "0"
    digits = max(0, 2 - int(math.floor(math.log10(abs(value)))))
    text = f"{value:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _si(value, unit, allow_below_one=True):
    if value == 0:
        return f"0 {unit}"
    index = int(math.floor(math.log10(abs(value)) / 3))
    if not allow_below_one:
        index = max(index, 0)
    index = max(-SI_ONE, min(index, len(SI_PREFIXES) - 1 - SI_ONE))
    return f"{number(value / 1000 ** index)} {SI_PREFIXES[SI_ONE + index]}{unit}"


def _iec(value, unit):
    if value == 0:
        return f"0 {unit}"
    index = max(0, min(int(math.floor(math.log(abs(value), 1024))), len(IEC_PREFIXES) - 1))
    return f"{number(value / 1024 ** index)} {IEC_PREFIXES[index]}{unit}"


def _seconds(value):
    if value == 0:
        return "0 s"
    for size, name in TIME_STEPS:
        if abs(value) >= size:
            return f"{number(value / size)} {name}"
    return f"{number(value / 1e-9)} ns"


def _short(value, suffixes=SHORT_SUFFIXES):
    if value == 0 or abs(value) < 1000:
        return number(value)
    index = min(int(math.floor(math.log10(abs(value)) / 3)), len(suffixes) - 1)
    return f"{number(value / 1000 ** index)}{suffixes[index]}"


def scale(unit, value):
    """The divisor format_value uses for `value` (1024^k for bytes, 1000^k for
    SI units, the time unit for seconds, 1 otherwise): an axis puts its ticks
    at round numbers of it, as Grafana does (4 GiB, not 4.29 GB in bytes)."""
    value = abs(value)
    if value == 0 or unit not in ("s", "bytes", "Bps", "flops", "short", "ops"):
        return 1
    if unit == "s":
        return next((size for size, _ in TIME_STEPS if value >= size), 1e-9)
    if unit == "bytes":
        return 1024 ** max(0, min(int(math.floor(math.log(value, 1024))), len(IEC_PREFIXES) - 1))
    floor = 0 if unit in ("short", "ops") else -SI_ONE
    return 1000 ** max(floor, min(int(math.floor(math.log10(value) / 3)), 4))


def format_value(unit, value):
    """`value` in Grafana's format for `unit`; "" for a missing value (NaN/None)."""
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r}: no Grafana format for it here; known: {sorted(UNITS)}")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if unit == "s":
        return _seconds(value)
    if unit == "bytes":
        return _iec(value, "B")
    if unit == "Bps":
        return _si(value, "B/s")
    if unit == "flops":
        return _si(value, "FLOP/s")
    if unit == "ops":
        return _short(value, COUNT_SUFFIXES) + " ops/s"
    if unit == "short":
        return _short(value)
    if unit == "percentunit":
        return f"{number(value * 100)}%"
    if unit == "bool_yes_no":
        return "No" if value == 0 else "Yes"
    return number(value)
