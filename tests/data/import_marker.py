"""A module with a side effect at import: it writes the file $EIDOS_IMPORT_MARKER names.

tests/security/test_code_references.py names functions of this module in plans and checks that
loading, explaining or running those plans never imports it (the file never appears), unless the
module is trusted.
"""

import os

_marker = os.environ.get("EIDOS_IMPORT_MARKER")
if _marker:
    with open(_marker, "a", encoding="utf-8") as f:
        f.write("imported\n")


def shout(s):
    return None if s is None else s.upper()
