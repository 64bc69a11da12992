"""No password leaves eidos: not in a message (ours or a driver's), explain(), repr, str, a plan's
JSON or the command's output. Passwords are found by parsing the uri as libpq reads it, never by
looking for the password's text (a one-letter password must not mask that letter everywhere)."""

from __future__ import annotations

import doctest
import json
import traceback
from urllib.parse import quote

import pytest

import eidos as ei
import eidos.ir.uri as U
from eidos.cli import main
from eidos.errors import ExecutionError, PlanError
from eidos.ir import nodes as N
from eidos.ir.schema import Schema
from eidos.ir.sources import SqlSource
from eidos.lanes.sql import execute as X
from eidos.testing.databases import POSTGRES_URI, postgres_available

# (password, how it is written in a uri's user information)
PASSWORDS = [("Xk2/9fQz8Lw", "Xk2%2F9fQz8Lw"), ("p@ss", "p%40ss"), ("a:b:c", "a:b:c"), ("100%", "100%25"),
             ("why?not", "why?not"), ("p", "p"), ("x", "x"), ("&=#;'\" ", "%26%3D%23%3B%27%22%20")]


def _everything(e: BaseException) -> str:
    return "".join(traceback.format_exception(e))


@pytest.fixture(scope="module")
def pg():
    why = postgres_available(POSTGRES_URI)
    if why:
        pytest.skip(why)


# ---------------------------------------------------------------- parsing

@pytest.mark.parametrize("password,written", PASSWORDS)
def test_every_uri_form_libpq_reads(password, written):
    forms = {
        f"postgresql://app:{written}@db.example:5432/sales": "postgresql://app@db.example:5432/sales",
        f"postgres://app:{written}@db.example/sales": "postgres://app@db.example/sales",
        f"postgresql://:{written}@db.example/sales": "postgresql://db.example/sales",
        f"postgresql://app:{written}@h1:5432,h2:5433,[::1]:5434/sales?sslmode=require":
            "postgresql://app@h1:5432,h2:5433,[::1]:5434/sales?sslmode=require",
        f"postgresql://db.example/sales?password={quote(password, safe='')}&application_name=me":
            "postgresql://db.example/sales?application_name=me",
        f"postgresql://app@db.example/sales?sslmode=require&sslpassword={quote(password, safe='')}":
            "postgresql://app@db.example/sales?sslmode=require",
    }
    for uri, public in forms.items():
        shown, secrets = U.split(uri)
        assert shown == public
        assert [v for _, v in secrets] == [password]
        assert U.split(U.join(shown, secrets)) == (shown, secrets)   # what the driver gets reads back the same
        source = SqlSource(Schema(()), uri=uri, table="t")
        for text in (source.uri, source.describe(), repr(source), str(source), source.location):
            assert text == public or public in text
        if len(password) > 1:
            assert password not in repr(source) and written not in repr(source)


@pytest.mark.parametrize("uri,what", [
    ("postgresql://app:Xk2/9fQz8Lw@127.0.0.1:5432/test", "'@' follows"),       # '/' in a password
    ("postgresql://app:p@ss@127.0.0.1:5432/test", "'@' follows"),              # '@' in a password
    ("postgresql://app:100%@127.0.0.1/test", "'%'"),
    ("postgresql://app:9f/q@127.0.0.1/test", "'@' follows"),
    ("postgresql://127.0.0.1/test?password=a&b", "no '='"),                     # '&' in a password
    ("postgresql://127.0.0.1?application_name=a@b", "'?'"),
])
def test_a_uri_libpq_would_misread_is_refused_without_showing_it(uri, what):
    with pytest.raises(PlanError, match=what) as e:
        ei.read_sql(uri, table="t")
    secret = uri.split("://")[1]
    assert secret not in _everything(e.value) and "100%" not in str(e.value) and "ss@127" not in str(e.value)
    assert "%40" in str(e.value)   # says how to write it


@pytest.mark.parametrize("text,gone,kept", [
    ("connect to postgresql://app:hunter2@db/x failed", ["hunter2"], ["postgresql://app:***@db/x"]),
    ("postgres://u:a@b@host/db", ["a@b"], ["host/db"]),
    ("host=db port=5432 password='se cr\\'et' dbname=x", ["se cr", "et'"], ["host=db", "dbname=x"]),
    ("host=db password=hunter2 user=app", ["hunter2"], ["user=app"]),
    ("PASSWORD = hunter2", ["hunter2"], []),
    ("sslpassword=k3y sslmode=require", ["k3y"], ["sslmode=require"]),
    ("postgresql://db/x?sslmode=require&password=hunter2&application_name=me", ["hunter2"],
     ["sslmode=require", "application_name=me"]),
    ("password authentication failed for user \"app\"", [], ["password authentication failed"]),
    ("sqlite:////data/a:b@c.db", [], ["sqlite:////data/a:b@c.db"]),
])
def test_redact_masks_by_parsing(text, gone, kept):
    out = U.redact(text)
    for g in gone:
        assert g not in out
    for k in kept:
        assert k in out


def test_the_module_examples():
    assert doctest.testmod(U, optionflags=doctest.ELLIPSIS).failed == 0


# ---------------------------------------------------------------- messages, real drivers

@pytest.mark.parametrize("password,written", PASSWORDS)
@pytest.mark.parametrize("where", ["127.0.0.1:5432/no_such_db_eidos", "127.0.0.1:1/test"])
def test_failing_connections_never_show_the_password(pg, password, written, where):
    uri = f"postgresql://postgres:{written}@{where}"
    with pytest.raises(PlanError) as e:
        ei.read_sql(uri, table="t")
    text = _everything(e.value)
    if len(password) > 1:
        assert password not in text and written not in text
    assert f"postgresql://postgres@{where}" in str(e.value)
    assert "***" not in str(e.value)
    if password in ("p", "x"):   # not masked letter by letter
        assert "postgresql" in str(e.value) and ("does not exist" in str(e.value) or "refused" in str(e.value))


def test_password_parameters_are_not_shown(pg):
    uri = "postgresql://postgres@127.0.0.1:5432/test?password=hunter2pw&dbname=no_such_db_eidos"
    with pytest.raises(PlanError) as e:
        ei.read_sql(uri, table="t")
    assert "hunter2pw" not in _everything(e.value) and "no_such_db_eidos" in str(e.value)


def test_run_time_failures_never_show_the_password(pg):
    flow = ei.read_sql("postgresql://postgres:hunter2pw@127.0.0.1:5432/test", query="SELECT 1 AS a")
    assert flow.run().to_pydict() == {"a": [1]}
    # the server goes away after the flow was built
    gone = SqlSource(flow.plan.source.schema, uri="postgresql://postgres:hunter2pw@127.0.0.1:1/test",
                     query="SELECT 1 AS a")
    with pytest.raises(ExecutionError) as e:
        ei.Flow(N.Scan(gone)).run()
    assert "hunter2pw" not in _everything(e.value) and "127.0.0.1:1" in str(e.value)


def test_engine_messages_holding_a_password_are_withheld():
    src = SqlSource(Schema(()), uri="postgresql://u:pa%40ss@h:5432/db?password=other", table="t")
    assert [v for _, v in src.secrets] == ["pa@ss", "other"]
    boom = RuntimeError(f"could not connect to {src.connection_uri()} (user u)")
    err = X.engine_error("postgresql", boom, [src], "connecting to")
    assert "could not connect to postgresql://u@h:5432/db (user u)" in str(err)
    assert err.__cause__ is None and err.__suppress_context__
    echoed = RuntimeError("authentication failed: password pa@ss is wrong, nor is other")
    err = X.engine_error("postgresql", echoed, [src], "connecting to")
    assert "pa@ss" not in str(err) and "other" not in str(err) and "withheld" in str(err)
    assert err.__cause__ is None
    keyvalue = RuntimeError("bad conninfo: host=h password='pa@ss' user=u")
    assert "pa@ss" not in str(X.engine_error("postgresql", keyvalue, [src], "connecting to"))
    plain = RuntimeError("database \"db\" does not exist")
    assert X.engine_error("postgresql", plain, [src], "connecting to").__cause__ is plain


def test_a_one_letter_password_does_not_mask_that_letter():
    src = SqlSource(Schema(()), uri="postgresql://u:p@h:5432/postgres", table="t")
    err = X.engine_error("postgresql", RuntimeError('database "postgres" does not exist'), [src], "connecting to")
    assert 'database "postgres" does not exist' in str(err) and "***" not in str(err)


def test_no_password_supplied_says_where_one_comes_from():
    src = SqlSource(Schema(()), uri="postgresql://u@h:5432/db", table="t")
    err = X.engine_error("postgresql", RuntimeError("fe_sendauth: no password supplied"), [src], "connecting to")
    assert "PGPASSWORD" in str(err) and ".pgpass" in str(err)


# ---------------------------------------------------------------- what is stored and shown

def test_plan_json_stores_no_password(pg, tmp_path, capsys):
    flow = ei.read_sql("postgresql://postgres:hunter2pw@127.0.0.1:5432/test?password=second%26pw",
                       query="SELECT 1 AS a")
    text = flow.to_json()
    assert "hunter2pw" not in text and "second" not in text
    for shown in (flow.explain(), repr(flow), str(flow.plan), str(flow.plan.source)):
        assert "hunter2pw" not in shown and "second" not in shown
    back = ei.Flow.from_json(text)
    assert back.plan.source.secrets == ()
    assert back.run().to_pydict() == {"a": [1]}   # trust auth here; elsewhere PGPASSWORD or ~/.pgpass
    # a plan file someone wrote with a password in it: used to connect, never shown or written again
    doc = json.loads(text)
    doc["plan"]["source"]["uri"] = "postgresql://postgres:hunter2pw@127.0.0.1:5432/test"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    assert main(["explain", str(path)]) == 0
    assert main(["run", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "hunter2pw" not in out + err and "postgresql://postgres@127.0.0.1:5432/test" in out
    assert "hunter2pw" not in ei.Flow.from_json(path.read_text()).to_json()
    doc["plan"]["source"]["uri"] = "postgresql://postgres:hunter2pw@127.0.0.1:1/test"
    path.write_text(json.dumps(doc))
    assert main(["run", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "hunter2pw" not in out + err and "error:" in err and "127.0.0.1:1" in err
