"""`mqtool.rules.dispatch` against `String.hashCode()` worked out by hand (s[0]*31^(n-1) + ... + s[n-1])."""

import pytest

from mqtool.rules.dispatch import tags_string_2_tags_code


@pytest.mark.parametrize(
    ("tags", "code"),
    [
        (None, 0),  # no TAGS property
        ("", 0),  # an empty TAGS: tagsString2tagsCode checks isEmpty, not null only
        ("a", 97),
        ("ab", 97 * 31 + 98),
        ("a||b", 97 * 31**3 + 124 * 31**2 + 124 * 31 + 98),  # a multi-tag string is hashed whole
        ("TagA" * 8, 1_043_938_872),  # past 2^32 it wraps as a Java int does
    ],
)
def test_tags_string_2_tags_code(tags, code):
    assert tags_string_2_tags_code(tags) == code
