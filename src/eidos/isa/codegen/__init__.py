"""The skeleton every compiled kernel target shares.

A compiled target turns a register program into one function over its threads. What does not
depend on the target lives here: the partition into basic blocks (blocks.py), a thread's state
codes (state.py), the handler table that writes each instruction through an emitter protocol
(handlers.py, emitter.py), the register-row view collectives read between rounds (rows.py), and
the loader that writes generated source once and imports it (loader.py). A target supplies its
primitives (an Emitter subclass in its compile.py), the helpers its generated code calls
(runtime.py), and its launches (__init__.py). Faults and their errors are eidos.isa.faults.
"""

from .blocks import CONTROL, Blocks, basic_blocks, block_starts
from .emitter import Emitter, s64, wrap
from .handlers import HANDLERS, emit_block
from .loader import cache_root, generator_version, import_source
from .rows import Row, ThreadView, thread_views

__all__ = ["CONTROL", "Blocks", "basic_blocks", "block_starts", "Emitter", "s64", "wrap", "HANDLERS", "emit_block",
           "cache_root", "generator_version", "import_source", "Row", "ThreadView", "thread_views"]
