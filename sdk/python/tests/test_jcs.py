"""RFC 8785 canonicalization: the RFC's examples, hard numbers, and the Go
canonicalizer's own output for 1,000 random doubles."""

import json
import math
import struct
import unittest
from decimal import Decimal
from pathlib import Path

from clearance_agent import canonicalize, format_number

GO_NUMBER_VECTORS = Path(__file__).resolve().parents[3] / "internal" / "canon" / "testdata" / "number_vectors.json"


def double(bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(bits))[0]


class RFC8785Examples(unittest.TestCase):
    def test_section_3_2_2_sample(self):
        value = {
            "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
            "literals": [None, True, False],
        }
        want = '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' \
               '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
        self.assertEqual(canonicalize(value), want.encode("utf-8"))

    def test_section_3_2_3_sorting_by_utf16_code_units(self):
        value = {
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\U0001f600": "Emoji: Grinning Face",
            "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis",
        }
        keys = list(json.loads(canonicalize(value)))
        # U+1F600 is the surrogate pair D83D DE00: before U+FB33 in UTF-16,
        # after it by code point.
        self.assertEqual(keys, ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"])

    def test_appendix_b_numbers(self):
        for bits, want in [
            ("0000000000000000", "0"), ("8000000000000000", "0"), ("0000000000000001", "5e-324"),
            ("8000000000000001", "-5e-324"), ("7fefffffffffffff", "1.7976931348623157e+308"),
            ("ffefffffffffffff", "-1.7976931348623157e+308"), ("4340000000000000", "9007199254740992"),
            ("c340000000000000", "-9007199254740992"), ("4430000000000000", "295147905179352830000"),
            ("44b52d02c7e14af5", "9.999999999999997e+22"), ("44b52d02c7e14af6", "1e+23"),
            ("44b52d02c7e14af7", "1.0000000000000001e+23"), ("444b1ae4d6e2ef4e", "999999999999999700000"),
            ("444b1ae4d6e2ef4f", "999999999999999900000"), ("444b1ae4d6e2ef50", "1e+21"),
            ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"), ("3eb0c6f7a0b5ed8d", "0.000001"),
            ("41b3de4355555553", "333333333.3333332"), ("41b3de4355555554", "333333333.33333325"),
            ("41b3de4355555555", "333333333.3333333"), ("41b3de4355555556", "333333333.3333334"),
            ("41b3de4355555557", "333333333.33333343"), ("becbf647612f3696", "-0.0000033333333333333333"),
            ("43143ff3c1cb0959", "1424953923781206.2"),
        ]:
            with self.subTest(bits=bits):
                self.assertEqual(format_number(double(bits)), want)

    def test_nan_and_infinities_are_refused(self):
        for bits in ("7fffffffffffffff", "7ff0000000000000", "fff0000000000000"):
            with self.subTest(bits=bits), self.assertRaises(ValueError):
                canonicalize([double(bits)])


class HardNumbers(unittest.TestCase):
    def test_as_ecmascript_writes_them(self):
        for value, want in [
            (1e21, "1e+21"), (1e20, "100000000000000000000"), (1e-7, "1e-7"), (1e-6, "0.000001"),
            (0.1 + 0.2, "0.30000000000000004"), (-0.0, "0"), (1234567.89, "1234567.89"), (100.0, "100"),
            (100, "100"), (-5, "-5"), (2**53, "9007199254740992"), (1.5e300, "1.5e+300"), (123e-20, "1.23e-18"),
            (Decimal("1234567.89"), "1234567.89"), (Decimal("0.10"), "0.1"), (Decimal("-0"), "0"),
        ]:
            with self.subTest(value=value):
                self.assertEqual(format_number(value), want)

    def test_values_a_double_cannot_hold_are_refused(self):
        for value in (2**53 + 1, 10**400, Decimal("0.1000000000000000000001"), Decimal("NaN"), math.inf):
            with self.subTest(value=value), self.assertRaises(ValueError):
                canonicalize(value)

    def test_the_go_canonicalizer_agrees(self):
        # Written by internal/canon's TestNumberVectors with Go's own Transform.
        rows = json.loads(GO_NUMBER_VECTORS.read_text())
        self.assertGreaterEqual(len(rows), 1000)
        for bits, want in rows:
            self.assertEqual(format_number(double(bits)), want, bits)


class Values(unittest.TestCase):
    def test_strings_escape_only_what_rfc_8785_escapes(self):
        s = "\"\\\b\f\n\r\t\u0000\u001f\u007f\u2028é😀/<>&"
        self.assertEqual(canonicalize(s), '"\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f\u007f\u2028é😀/<>&"'.encode())

    def test_nesting_and_whitespace(self):
        self.assertEqual(canonicalize({"b": [1, {"d": None, "c": "x"}], "a": {}}), b'{"a":{},"b":[1,{"c":"x","d":null}]}')
        self.assertEqual(canonicalize(()), b"[]")

    def test_what_is_not_json_is_refused(self):
        with self.assertRaises(ValueError):
            canonicalize("\ud800")  # a lone surrogate is not I-JSON
        with self.assertRaises(TypeError):
            canonicalize({1: "a"})
        with self.assertRaises(TypeError):
            canonicalize({"a": object()})
        with self.assertRaises(TypeError):
            canonicalize(b"bytes")


if __name__ == "__main__":
    unittest.main()
