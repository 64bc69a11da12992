"""Functions the python lane's tests run, at module level: worker processes get them by reference."""

from __future__ import annotations

import os
import re
import time

import pyarrow as pa
import pyarrow.compute as pc

import eidos as ei


def double(x):
    return None if x is None else 2 * x


def divide(a, b):
    """Raises ZeroDivisionError for b == 0: called only where the reference lane calls it, or a test fails."""
    return None if a is None or b is None else a // b


def fails_on_seven(x):
    if x == 7:
        raise ValueError(f"seven is not allowed: {x!r}")
    return x


def slow_then_fails(x):
    """Slow on 0, fails on 7: a later batch fails before an earlier one does."""
    if x == 0:
        time.sleep(0.5)
    return fails_on_seven(x)


def text_of(x):
    return None if x is None else repr(x)


def wrong_type(x):
    return "not a number"


def spins(x):
    while True:
        pass


def sleeps(x):
    time.sleep(60)
    return x


def pid(x):
    return os.getpid()


def exits(x):
    os._exit(3)


def identity(x):
    return x


def slow_double(x):
    time.sleep(0.001)
    return None if x is None else 2 * x


WORD = re.compile(r"(\w+)@(\w+)\.com")


def domain(s):
    m = None if s is None else WORD.search(s)
    return None if m is None else m.group(2)


def plus_one_batches(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch([pc.add(batch.column(0), 1)], names=[batch.schema.names[0]])


def raises_batches(batch: pa.RecordBatch) -> pa.RecordBatch:
    raise RuntimeError(f"batch of {batch.num_rows} rows refused")


def wrong_schema_batches(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.record_batch([pa.array(["x"] * batch.num_rows)], names=["other"])


class Unpicklable(Exception):
    """An exception that cannot be pickled: it travels back from a worker as its type and text."""

    def __init__(self, value, lock):
        super().__init__(f"bad value {value!r}")
        self.lock = lock


def raises_unpicklable(x):
    import threading

    raise Unpicklable(x, threading.Lock())


ei.register_udf(double, "tests.python_native:double")
