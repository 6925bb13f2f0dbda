"""RFC 8785 JSON Canonicalization Scheme (JCS), with the standard library only.

Clearance accepts an intent only when its payload is byte for byte its own JCS
form, so this module must agree with the server exactly:

* strings: only ``"`` and ``\\`` and the controls below U+0020 are escaped
  (``\\b \\f \\n \\r \\t`` by name, the others as ``\\u00xx``); everything else,
  non-ASCII included, is written as UTF-8;
* object members sorted by the UTF-16 code units of their names;
* numbers as IEEE-754 doubles written the way ECMAScript's Number::toString
  writes them (``1e+21``, ``1e-7``, ``0.30000000000000004``, ``-0`` as ``0``);
  NaN and the infinities are refused.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

__all__ = ["canonicalize", "format_number"]

_NAMED_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def canonicalize(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON value.

    Accepts dict (str keys), list, tuple, str, int, float, Decimal, bool and
    None. Raises ValueError for NaN, the infinities, integers or Decimals that
    a double cannot hold exactly, and strings with lone surrogates (JCS is
    defined over I-JSON); TypeError for anything else.
    """
    parts: list[str] = []
    _write(value, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError("JCS: a string holds a lone surrogate, which I-JSON forbids") from e


def _write(v: Any, out: list[str]) -> None:
    # bool before int: True is an int in Python.
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        _write_string(v, out)
    elif isinstance(v, (int, float, Decimal)):
        out.append(format_number(v))
    elif isinstance(v, dict):
        for k in v:
            if not isinstance(k, str):
                raise TypeError(f"JCS: object member names must be str, not {type(k).__name__}")
        out.append("{")
        for i, k in enumerate(sorted(v, key=_utf16_key)):
            if i:
                out.append(",")
            _write_string(k, out)
            out.append(":")
            _write(v[k], out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"JCS: {type(v).__name__} is not a JSON value")


def _utf16_key(name: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly as the code units do.
    # surrogatepass keeps a lone surrogate sortable; encoding refuses it later.
    return name.encode("utf-16-be", "surrogatepass")


def _write_string(s: str, out: list[str]) -> None:
    out.append('"')
    for ch in s:
        esc = _NAMED_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')


def format_number(x: int | float | Decimal) -> str:
    """Write a number as ECMAScript's Number::toString writes its double.

    An int must be exactly a double, and a Decimal the shortest decimal form
    of a double (Decimal("1234567.89") is; Decimal("0.1000000000000000001")
    is not): ValueError otherwise, as the canonical form would change the value.
    """
    if isinstance(x, bool):
        raise TypeError("JCS: a bool is not a number")
    if isinstance(x, int):
        f = float(x) if abs(x) < 2**1024 else math.inf
        if math.isinf(f) or int(f) != x:
            raise ValueError(f"JCS: the integer {x} is not exactly representable as a double")
    elif isinstance(x, Decimal):
        if not x.is_finite():
            raise ValueError("JCS: NaN and Infinity are not JSON numbers")
        f = float(x)
        # The double's shortest decimal form must be the same number.
        if Decimal(repr(f)) != x:
            raise ValueError(f"JCS: the decimal {x} is not the value of any double")
    elif isinstance(x, float):
        f = x
    else:
        raise TypeError(f"JCS: {type(x).__name__} is not a number")
    if math.isnan(f) or math.isinf(f):
        raise ValueError("JCS: NaN and Infinity are not JSON numbers")
    if f == 0:
        return "0"  # -0 included
    sign = "-" if f < 0 else ""
    digits, n = _shortest_digits(abs(f))
    k = len(digits)
    # ECMA-262 Number::toString(x), steps for k digits and exponent n (x = 0.digits * 10^n).
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp = ("+" if e >= 0 else "-") + str(abs(e))
        body = (digits if k == 1 else digits[0] + "." + digits[1:]) + "e" + exp
    return sign + body


def _shortest_digits(f: float) -> tuple[str, int]:
    """Return the shortest round-trip decimal digits of f > 0 (no leading or
    trailing zeros) and n such that f = 0.<digits> * 10**n.

    repr() gives the shortest string that reads back as the same double,
    the choice ECMAScript's Number::toString requires too.
    """
    r = repr(f)
    mantissa, _, exp = r.partition("e")
    whole, _, frac = mantissa.partition(".")
    all_digits = whole + frac
    stripped = all_digits.lstrip("0")
    n = len(whole) + (int(exp) if exp else 0) - (len(all_digits) - len(stripped))
    return stripped.rstrip("0"), n
