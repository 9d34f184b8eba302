"""Conformance cases of claimed operators that Kiln deliberately does not pass, with the reason.

Each entry is a regular expression over the case name (`test_...`) and the reason. Keep reasons
specific: an exclusion is a documented limitation, never a way to hide a bug.
"""

from tests.conformance import exclusions_math, exclusions_shape, exclusions_spatial

EXCLUDED: dict[str, str] = {
    **exclusions_spatial.EXCLUDED,
    **exclusions_math.EXCLUDED,
    **exclusions_shape.EXCLUDED,
}
