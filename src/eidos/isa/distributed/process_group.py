"""A device group over torch.distributed: one process per rank, gloo between CPU processes, NCCL between GPUs.

The engines' own reductions give the reference's answer where they can (float Sum and Product, integer Sum,
Product, Min and Max of the widths they carry); the rest is brought there first: 16-bit integers travel
widened to int32, unsigned 32/64-bit integers compare with the sign bit flipped, and float Min/Max compare
order keys (the bits as a signed integer, negatives reversed, NaN made the winner) so NaN propagates and
-0.0 is below 0.0 as in the reference, where gloo and NCCL would drop NaN or pick either zero.
"""

from __future__ import annotations

import warnings

import numpy as np

from eidos.errors import BackendError

from ..instructions import ReduceOperation as R
from ..types import Type
from .group import Group

_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}
_NP_INT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_FLOAT = {Type.F16: "float16", Type.BF16: "bfloat16", Type.F32: "float32", Type.F64: "float64"}


class TorchGroup(Group):
    """This process's rank of the default torch.distributed process group (init_process_group first)."""

    def __init__(self) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self.backend = str(dist.get_backend())
        self.device = torch.device("cuda", torch.cuda.current_device()) if self.backend == "nccl" else \
            torch.device("cpu")
        self._groups: dict[tuple[int, ...], object] = {}
        self.capturable = self.backend == "nccl"   # NCCL's calls join a CUDA graph; gloo's run on the host

    def _group(self, devices):
        """(members, torch group or None for the world): every rank makes a subgroup, in the same order."""
        m = self.members(devices)
        if len(m) == self.size:
            return m, None
        if m not in self._groups:
            self._groups[m] = self.dist.new_group(list(m))
        return m, self._groups[m]

    # ---- typed tensors on the group's device ----------------------------------------------------
    def _tensor(self, array, ty: Type):
        """(tensor on the group's device viewing or copying array, write-back or None)."""
        torch = self.torch
        dt = getattr(torch, _FLOAT[ty]) if ty.is_float else getattr(torch, "uint8" if ty is Type.U8 else
                                                                       _INT[ty.size_bytes])
        if isinstance(array, np.ndarray):
            t = torch.from_numpy(array.view(_NP_INT[ty.size_bytes])).view(dt)
        else:
            t = array.view(dt)
        if t.device == self.device:
            return t, None
        return t.to(self.device), t

    def _work(self, t, op, ty: Type):
        """(the tensor the engine reduces, how to bring its result back into t)."""
        torch = self.torch
        if ty.is_float and op in (R.Sum, R.Product):
            return t, None
        bits = t.view(getattr(torch, _INT[ty.size_bytes])) if ty is not Type.U8 else t
        if ty.is_float:   # Min/Max on order keys
            key = bits ^ ((bits >> (ty.bits - 1)) & ((1 << (ty.bits - 1)) - 1))
            nan = torch.isnan(t)
            key = torch.where(nan, torch.full_like(key, (-(1 << (ty.bits - 1))) if op is R.Min else
                                                   (1 << (ty.bits - 1)) - 1), key)
            if ty.bits == 16:
                return key.to(torch.int32), lambda w: bits.copy_(_unkey(w.to(torch.int16), 16))
            return key, lambda w: bits.copy_(_unkey(w, ty.bits))
        if ty.bits == 16:
            wide = bits.to(torch.int32)
            if ty.is_unsigned:
                wide &= 0xFFFF
            return wide, lambda w: bits.copy_(w.to(torch.int16))
        if ty.is_unsigned and ty.bits > 8 and op in (R.Min, R.Max):
            low = -(1 << (ty.bits - 1))
            return bits ^ low, lambda w: bits.copy_(w ^ low)
        return bits, None

    def _op(self, op):
        O = self.dist.ReduceOp
        return {R.Sum: O.SUM, R.Product: O.PRODUCT, R.Min: O.MIN, R.Max: O.MAX}[op]

    # ---- the collectives -------------------------------------------------------------------------
    def _collective(self, devices, out, ty, op, call, src=None, root=None) -> None:
        """call(torch group, out's tensor, src's tensor) where this rank takes part: tensors the engine's
        reduction gives the definition on (op), or bytes (op None: data only); the result back in out."""
        if not len(out):   # the same on every rank (n is the program's): nothing to send
            return
        m, pg = self._group(devices)
        if root is not None and root not in m:
            raise BackendError(f"Broadcast: root {root} is not one of the devices {m}")
        if self.rank not in m:
            return
        o, back = self._tensor(out, ty)
        wo, finish = self._work(o, op, ty) if op is not None else (o.view(self.torch.uint8), None)
        ws = None
        if src is not None:
            s, _ = self._tensor(src, ty)
            ws = self._work(s, op, ty)[0] if op is not None else s.view(self.torch.uint8)
        with warnings.catch_warnings():   # torch 2.13 renames the *_tensor collectives
            warnings.simplefilter("ignore", FutureWarning)
            call(pg, wo, ws)
        if finish is not None:
            finish(wo)
        if back is not None:
            back.copy_(o)

    def all_reduce(self, array, op, ty, devices=()) -> None:
        self._collective(devices, array, ty, op,
                         lambda pg, w, _: self.dist.all_reduce(w, op=self._op(op), group=pg))

    def all_gather(self, out, src, ty, devices=()) -> None:
        self._collective(devices, out, ty, None,
                         lambda pg, o, s: self.dist.all_gather_into_tensor(o, s, group=pg), src)

    def broadcast(self, array, root: int, ty, devices=()) -> None:
        self._collective(devices, array, ty, None,
                         lambda pg, t, _: self.dist.broadcast(t, src=root, group=pg), root=root)

    def reduce_scatter(self, out, src, op, ty, devices=()) -> None:
        self._collective(devices, out, ty, op,
                         lambda pg, o, s: self.dist.reduce_scatter_tensor(o, s, op=self._op(op), group=pg), src)

    def barrier(self) -> None:
        self.dist.barrier()


def _unkey(key, bits: int):
    """The float bits of an order key (the key map is its own inverse)."""
    return key ^ ((key >> (bits - 1)) & ((1 << (bits - 1)) - 1))
