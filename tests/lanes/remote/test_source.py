"""RemoteSource: where it lives (rule 2 reads `location`), how it is named, and its JSON form."""

from __future__ import annotations

import json

import pytest

from eidos.errors import PlanError
from eidos.ir import dtypes as T
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.serialize import dumps, loads
from eidos.ir.sources import RemoteSource

SCHEMA = Schema([("id", T.Int64), ("name", T.String)])


def refuse(name: str):
    raise PlanError(f"no function {name}")


def test_location_names_the_service():
    source = RemoteSource(SCHEMA, address="eidos://gpu1:7000", handle=4611686018427387907, rows=12)
    assert source.location == "remote:eidos://gpu1:7000"
    assert source.estimated_rows == 12
    assert source.describe() == "table 4611686018427387907 on the eidos service at eidos://gpu1:7000 (12 rows)"


def test_json_round_trip():
    source = RemoteSource(SCHEMA, address="eidos://127.0.0.1:7000", handle=2**62 + 5, rows=None)
    text = dumps(N.Scan(source, ("id",)), name=refuse)
    assert json.loads(text)["plan"]["source"] == {"schema": [["id", "Int64"], ["name", "String"]], "source": "remote",
                                                  "address": "eidos://127.0.0.1:7000", "handle": 2**62 + 5,
                                                  "rows": None}
    back = loads(text, resolve=refuse)
    assert back == N.Scan(source, ("id",))
    assert back.source.handle == 2**62 + 5


@pytest.mark.parametrize(("change", "message"), [
    ({"handle": -1}, "source.handle: expected an integer in 0.."),
    ({"handle": "7"}, "source.handle: expected an integer"),
    ({"handle": True}, "source.handle: expected an integer"),
    ({"address": "http://h:1"}, "a remote source's address is eidos://host:port"),
    ({"address": None}, "source.address: expected a string"),
    ({"rows": 1.5}, "source.rows: expected an integer"),
    ({"path": "/etc/passwd"}, "unknown key 'path'"),
])
def test_malformed_json_is_refused_naming_where(change, message):
    doc = json.loads(dumps(N.Scan(RemoteSource(SCHEMA, address="eidos://h:1", handle=3)), name=refuse))
    doc["plan"]["source"].update(change)
    with pytest.raises(PlanError, match=message):
        loads(json.dumps(doc), resolve=refuse)
