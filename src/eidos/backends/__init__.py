"""The lanes, one folder each, registered through the entry point group `eidos.backends`.

`ei.backends()` (API.md) and this package (DESIGN.md) share a name: importing
a lane binds `eidos.backends` to this module, so the module itself is made
callable and answers exactly what `eidos.hal.registry.backends()` does.
"""

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self):
        from eidos.hal.registry import backends

        return backends()


sys.modules[__name__].__class__ = _CallablePackage
