r"""Character classes the tokenizer's regexes need and ``re`` cannot name: marks, CJK word characters.

``re``'s ``\w`` is exactly ``str.isalnum()`` plus ``_``, which is most of what ``tokens.py``
calls a word character; but a word also keeps its combining marks (Devanagari vowel signs, a
decomposed accent), and ``re`` has no ``\p{M}``. The ``regex`` module has one, but its Unicode
database is not Python's (it knows marks Python's ``unicodedata`` still calls unassigned), so
words would be cut differently from the rule the index was built with.

Which characters of the CJK blocks are word characters is the second class: the letters are,
but the blocks also hold radicals, strokes, kana voicing marks and two punctuation marks, which
FTS5's ``unicode61`` treats as separators (so a token made of one could never be found).

Both come from ``unicodedata``. Scanning every code point takes about a quarter of a second,
too slow for every command that searches, so the answer for the Unicode version of Python 3.11
(our oldest, 14.0.0) is kept below and ``scan`` computes it for any other version, once per
process. A test checks the kept copy against ``scan``.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import NamedTuple

CJK_BLOCKS = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31A0, 0x31FF),  # Bopomofo ext, Katakana ext
    (0x3400, 0x4DBF),  # CJK ext A
    (0x4E00, 0x9FFF),  # CJK unified
    (0xA960, 0xA97F),  # Hangul Jamo ext A
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xD7B0, 0xD7FF),  # Hangul Jamo ext B
    (0xF900, 0xFAFF),  # CJK compatibility
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3134F),  # CJK ext B..G
)
"""Scripts written without spaces between words (plus Hangul, whose words are short)."""

UNICODE61_MARK_LETTERS = frozenset([*range(0x19B0, 0x19C1), 0x19C8, 0x19C9, 0x1CF2, 0x1CF3])
"""Letters ``unicode61`` still files as spacing marks (New Tai Lue vowel signs, two Vedic signs):
its Unicode tables predate their move to letters, so it treats them as separators, and a word
made only of them could never be found."""

Ranges = tuple[tuple[int, int], ...]


class UnicodeClasses(NamedTuple):
    marks: Ranges
    """Every code point of general category M* (Mn, Mc, Me)."""
    cjk_separators: Ranges
    """The code points of CJK_BLOCKS that are symbols, punctuation or marks (S*, P*, M*)."""
    cjk_unassigned: Ranges
    """The code points of CJK_BLOCKS that are neither letters nor digits nor separators (unassigned)."""


KEPT_VERSION = "14.0.0"

# UnicodeClasses for KEPT_VERSION, as hex ranges.
_KEPT_MARKS = (
    "300-36F 483-489 591-5BD 5BF 5C1-5C2 5C4-5C5 5C7 610-61A 64B-65F 670 6D6-6DC 6DF-6E4 6E7-6E8 "
    "6EA-6ED 711 730-74A 7A6-7B0 7EB-7F3 7FD 816-819 81B-823 825-827 829-82D 859-85B 898-89F 8CA-8E1 "
    "8E3-903 93A-93C 93E-94F 951-957 962-963 981-983 9BC 9BE-9C4 9C7-9C8 9CB-9CD 9D7 9E2-9E3 9FE "
    "A01-A03 A3C A3E-A42 A47-A48 A4B-A4D A51 A70-A71 A75 A81-A83 ABC ABE-AC5 AC7-AC9 ACB-ACD AE2-AE3 "
    "AFA-AFF B01-B03 B3C B3E-B44 B47-B48 B4B-B4D B55-B57 B62-B63 B82 BBE-BC2 BC6-BC8 BCA-BCD BD7 "
    "C00-C04 C3C C3E-C44 C46-C48 C4A-C4D C55-C56 C62-C63 C81-C83 CBC CBE-CC4 CC6-CC8 CCA-CCD CD5-CD6 "
    "CE2-CE3 D00-D03 D3B-D3C D3E-D44 D46-D48 D4A-D4D D57 D62-D63 D81-D83 DCA DCF-DD4 DD6 DD8-DDF "
    "DF2-DF3 E31 E34-E3A E47-E4E EB1 EB4-EBC EC8-ECD F18-F19 F35 F37 F39 F3E-F3F F71-F84 F86-F87 "
    "F8D-F97 F99-FBC FC6 102B-103E 1056-1059 105E-1060 1062-1064 1067-106D 1071-1074 1082-108D 108F "
    "109A-109D 135D-135F 1712-1715 1732-1734 1752-1753 1772-1773 17B4-17D3 17DD 180B-180D 180F "
    "1885-1886 18A9 1920-192B 1930-193B 1A17-1A1B 1A55-1A5E 1A60-1A7C 1A7F 1AB0-1ACE 1B00-1B04 "
    "1B34-1B44 1B6B-1B73 1B80-1B82 1BA1-1BAD 1BE6-1BF3 1C24-1C37 1CD0-1CD2 1CD4-1CE8 1CED 1CF4 "
    "1CF7-1CF9 1DC0-1DFF 20D0-20F0 2CEF-2CF1 2D7F 2DE0-2DFF 302A-302F 3099-309A A66F-A672 A674-A67D "
    "A69E-A69F A6F0-A6F1 A802 A806 A80B A823-A827 A82C A880-A881 A8B4-A8C5 A8E0-A8F1 A8FF A926-A92D "
    "A947-A953 A980-A983 A9B3-A9C0 A9E5 AA29-AA36 AA43 AA4C-AA4D AA7B-AA7D AAB0 AAB2-AAB4 AAB7-AAB8 "
    "AABE-AABF AAC1 AAEB-AAEF AAF5-AAF6 ABE3-ABEA ABEC-ABED FB1E FE00-FE0F FE20-FE2F 101FD 102E0 "
    "10376-1037A 10A01-10A03 10A05-10A06 10A0C-10A0F 10A38-10A3A 10A3F 10AE5-10AE6 10D24-10D27 "
    "10EAB-10EAC 10F46-10F50 10F82-10F85 11000-11002 11038-11046 11070 11073-11074 1107F-11082 "
    "110B0-110BA 110C2 11100-11102 11127-11134 11145-11146 11173 11180-11182 111B3-111C0 111C9-111CC "
    "111CE-111CF 1122C-11237 1123E 112DF-112EA 11300-11303 1133B-1133C 1133E-11344 11347-11348 "
    "1134B-1134D 11357 11362-11363 11366-1136C 11370-11374 11435-11446 1145E 114B0-114C3 115AF-115B5 "
    "115B8-115C0 115DC-115DD 11630-11640 116AB-116B7 1171D-1172B 1182C-1183A 11930-11935 11937-11938 "
    "1193B-1193E 11940 11942-11943 119D1-119D7 119DA-119E0 119E4 11A01-11A0A 11A33-11A39 11A3B-11A3E "
    "11A47 11A51-11A5B 11A8A-11A99 11C2F-11C36 11C38-11C3F 11C92-11CA7 11CA9-11CB6 11D31-11D36 11D3A "
    "11D3C-11D3D 11D3F-11D45 11D47 11D8A-11D8E 11D90-11D91 11D93-11D97 11EF3-11EF6 16AF0-16AF4 "
    "16B30-16B36 16F4F 16F51-16F87 16F8F-16F92 16FE4 16FF0-16FF1 1BC9D-1BC9E 1CF00-1CF2D 1CF30-1CF46 "
    "1D165-1D169 1D16D-1D172 1D17B-1D182 1D185-1D18B 1D1AA-1D1AD 1D242-1D244 1DA00-1DA36 1DA3B-1DA6C "
    "1DA75 1DA84 1DA9B-1DA9F 1DAA1-1DAAF 1E000-1E006 1E008-1E018 1E01B-1E021 1E023-1E024 1E026-1E02A "
    "1E130-1E136 1E2AE 1E2EC-1E2EF 1E8D0-1E8D6 1E944-1E94A E0100-E01EF"
)
_KEPT_CJK_SEPARATORS = "2E80-2E99 2E9B-2EF3 2F00-2FD5 3099-309C 30A0 30FB 31C0-31E3"
_KEPT_CJK_UNASSIGNED = (
    "2E9A 2EF4-2EFF 2FD6-2FDF 3040 3097-3098 3100-3104 3130 318F 31E4-31EF A97D-A97F D7A4-D7AF "
    "D7C7-D7CA D7FC-D7FF FA6E-FA6F FADA-FAFF 2A6E0-2A6FF 2B739-2B73F 2B81E-2B81F 2CEA2-2CEAF "
    "2EBE1-2F7FF 2FA1E-2FFFF 3134B-3134F"
)


def _parse(hex_ranges: str) -> Ranges:
    out = []
    for item in hex_ranges.split():
        lo, _, hi = item.partition("-")
        out.append((int(lo, 16), int(hi or lo, 16)))
    return tuple(out)


def _ranges(codes: list[int]) -> Ranges:
    out: list[tuple[int, int]] = []
    for code in codes:
        if out and out[-1][1] == code - 1:
            out[-1] = (out[-1][0], code)
        else:
            out.append((code, code))
    return tuple(out)


def scan() -> UnicodeClasses:
    """The classes, by asking ``unicodedata`` about each code point (about a quarter of a second)."""
    category = unicodedata.category
    marks = [code for code in range(0x110000) if category(chr(code))[0] == "M"]
    separators: list[int] = []
    unassigned: list[int] = []
    for lo, hi in CJK_BLOCKS:
        for code in range(lo, hi + 1):
            ch = chr(code)
            if category(ch)[0] in "SPM":
                separators.append(code)
            elif not ch.isalnum():
                unassigned.append(code)
    return UnicodeClasses(_ranges(marks), _ranges(separators), _ranges(unassigned))


@functools.cache
def classes() -> UnicodeClasses:
    """``scan()`` for the running Python's Unicode version (kept for 14.0.0, computed otherwise)."""
    if unicodedata.unidata_version == KEPT_VERSION:
        return UnicodeClasses(_parse(_KEPT_MARKS), _parse(_KEPT_CJK_SEPARATORS), _parse(_KEPT_CJK_UNASSIGNED))
    return scan()


def word_ranges_bmp(extra: Ranges) -> Ranges:
    r"""The code points below U+10000 that ``re``'s ``\w`` matches (``str.isalnum()`` or ``_``), or
    that ``extra`` holds: such a class spelled out as ranges, which ``re`` tests in one lookup.
    """
    held = {code for lo, hi in extra for code in range(lo, min(hi, 0xFFFF) + 1)}
    return _ranges([code for code in range(0x10000) if code in held or code == 0x5F or chr(code).isalnum()])


def cjk_word_ranges() -> Ranges:
    """CJK_BLOCKS without their symbols, punctuation and marks."""
    separators = classes().cjk_separators
    out: list[tuple[int, int]] = []
    for lo, hi in CJK_BLOCKS:
        start = lo
        for s_lo, s_hi in separators:
            if s_hi < start or s_lo > hi:
                continue
            if s_lo > start:
                out.append((start, s_lo - 1))
            start = s_hi + 1
        if start <= hi:
            out.append((start, hi))
    return tuple(out)


def char_class(ranges: Ranges) -> str:
    """The inside of a regex character set ``[...]`` matching exactly these code points."""
    return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)
