"""Remote execution: an eidos service on another machine (a GPU node) runs plan parts, tensor work and
ISA programs on data sent to it, and keeps the results there until they are fetched.

`eidos serve` starts the service (eidos.remote.service); `ei.connect("eidos://host:port", token=...)`
connects to one (eidos.remote.client). The control plane is Arrow Flight; buffers travel on a framed
TCP channel (frames.py, transport.py, channel.py, transfer.py) straight into a pre-allocated pool.
"""

from __future__ import annotations


def connect(address: str, token: str | None = None, **options):
    """Connect to an eidos service (eidos.remote.client.connect; imported here so `import eidos` stays light)."""
    from .client import connect

    return connect(address, token, **options)


def current():
    """The most recently opened connection still open, or None."""
    import sys

    client = sys.modules.get("eidos.remote.client")
    return client.current() if client is not None else None
