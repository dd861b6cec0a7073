"""README's security table is the code's (``auth.acl.RULES``), and the
rules cover exactly the request types the code checks (``NEEDS``)."""

import os

from duomq.auth.acl import NEEDS, RULES
from duomq.proto import pb

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def test_the_readme_table_says_what_each_request_needs():
    assert set(RULES) == set(NEEDS)
    with open(README) as f:
        text = f.read()
    for type_, rule in RULES.items():
        row = f"| `{pb.RequestType.Name(type_)}` | {rule} |"
        assert row in text, f"README's security table lacks or misstates: {row}"
