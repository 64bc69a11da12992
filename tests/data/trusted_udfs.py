"""Functions for the trust tests: what a trusted module defines, and what it merely holds."""

import os  # noqa: F401 - reachable as trusted_udfs:os.system, which must be refused
from os import system  # noqa: F401 - defined in os (posix), held here: must be refused
from subprocess import run as launch  # noqa: F401 - likewise

import pyarrow as pa
import pyarrow.compute as pc

import eidos as ei


def double(x):
    return None if x is None else 2 * x


@ei.udf(ei.Int64)
def plus_one(x):
    """Registered by the decorator as 'tests.data.trusted_udfs:plus_one'."""
    return None if x is None else x + 1


def negate_batch(batch):
    return pa.record_batch({"a": pc.negate(batch["a"])})


class Scale:
    @staticmethod
    def triple(x):
        return None if x is None else 3 * x
