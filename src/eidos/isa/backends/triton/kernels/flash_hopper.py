"""Attention forward on Hopper in Gluon: the FlashAttention-3 schedule that Triton's own pipeliner
does not make (Triton 3.6 will not warp-specialize a Hopper loop).

One program owns 128 query rows of one (batch, head) and is warp-specialized: a producer warp
issues TMA copies (the queries, then each key tile's K and V into a ring of STAGES shared-memory
slots, each behind its own mbarrier), and two consumer warpgroups of 64 rows each run the key loop
on their own, handing a slot back with one arrive on its `empty` barrier; they never wait for each
other, so one's softmax runs while the other's products hold the tensor cores. Within a consumer
the product S_j = Q K_j^T and the previous tile's P_{j-1} V_{j-1} are asynchronous wgmma in flight
together, and tile j's softmax runs under the second; P stays in registers as its A operand.
Arithmetic is that of attention.py's kernel (exp2 with the scale folded in, p rounded to the input
type, float32 accumulators, one division at the end): with 128 x 128 tiles the bytes are the same.

The causal form masks only the diagonal tiles and walks the query blocks heaviest first.
"""

from __future__ import annotations

import math

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)


@gluon.jit
def _softmax_tile(qk, m_i, l_i, scale, rows, j, diag, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr,
                  layout: gl.constexpr):
    """Tile j's scores folded into the running max and sum: (p, m, l, alpha)."""
    if CAUSAL:
        if j >= diag:
            cols = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
            keep = gl.expand_dims(rows, 1) >= gl.expand_dims(cols, 0)
            qk = gl.where(keep, qk, -float("inf"))
    m_new = gl.maximum(m_i, gl.max(qk, axis=1) * scale)
    p = gl.exp2(qk * scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_new = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_new, alpha


@gluon.jit
def _load_kv(k_desc, v_desc, k_smem, v_smem, k_bar, v_bar, row, slot, pred):
    """K and V tile at `row` into ring slot `slot`, each behind its own barrier."""
    mbarrier.expect(k_bar.index(slot), k_desc.block_type.nbytes, pred)
    tma.async_copy_global_to_shared(k_desc, [row, 0], k_bar.index(slot), k_smem.index(slot), pred)
    mbarrier.expect(v_bar.index(slot), v_desc.block_type.nbytes, pred)
    tma.async_copy_global_to_shared(v_desc, [row, 0], v_bar.index(slot), v_smem.index(slot), pred)


@gluon.jit
def _ws_producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, empty, row0, q_row, tiles,
                 STAGES: gl.constexpr):
    """One warp: both warpgroups' queries, then each tile's K and V as soon as its slot is free."""
    HALF: gl.constexpr = q_desc.block_type.shape[0]
    for c in gl.static_range(2):
        mbarrier.expect(q_bar.index(c), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_row + c * HALF, 0], q_bar.index(c), q_smem.index(c))
    for j in range(tiles):
        slot = j % STAGES
        if j >= STAGES:
            mbarrier.wait(empty.index(slot), (j // STAGES - 1) & 1)
        _load_kv(k_desc, v_desc, k_smem, v_smem, k_bar, v_bar, row0 + j * k_desc.block_type.shape[0], slot, True)


@gluon.jit
def _ws_step(q, k_smem, v_smem, k_bar, v_bar, empty, qk, p, m_i, l_i, acc, scale, rows, j, diag, zero,
             NEXT: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr, BLOCK_N: gl.constexpr,
             s_layout: gl.constexpr, p_layout: gl.constexpr, row_o: gl.constexpr):
    """Tile j with S_j in flight on entry: P_{j-1} V_{j-1} issued, S_j's softmax under it, S_{j+1}
    issued (NEXT) before P_{j-1} V_{j-1} is waited for; the slot of tile j - 1 handed back."""
    prev = (j - 1) % STAGES
    mbarrier.wait(v_bar.index(prev), ((j - 1) // STAGES) & 1)
    acc = warpgroup_mma(p, v_smem.index(prev), acc, is_async=True)
    qk = warpgroup_mma_wait(1, deps=[qk])
    p, m_i, l_i, alpha = _softmax_tile(qk, m_i, l_i, scale, rows, j, diag, CAUSAL, BLOCK_N, s_layout)
    if NEXT:
        slot = (j + 1) % STAGES
        mbarrier.wait(k_bar.index(slot), ((j + 1) // STAGES) & 1)
        qk = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True)
        acc = warpgroup_mma_wait(1, deps=[acc])
    else:
        acc = warpgroup_mma_wait(0, deps=[acc])
    mbarrier.arrive(empty.index(prev), count=1)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
    p = gl.convert_layout(p.to(k_smem.dtype), p_layout)
    return p, m_i, l_i, acc, qk


@gluon.jit
def _ws_consumer(c: gl.constexpr, o_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, empty, scale, q_row,
                 start_m, tiles, CAUSAL: gl.constexpr, STAGES: gl.constexpr, EARLY: gl.constexpr):
    """One warpgroup's 64 query rows through every key tile: S_j and P_{j-1} V_{j-1} in flight together,
    the softmax of S_j under the second; a slot handed back (one arrive) once P_{j-1} V_{j-1} is done."""
    HALF: gl.constexpr = o_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = o_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    dtype: gl.constexpr = o_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    rows = start_m * 2 * HALF + c * HALF + gl.arange(0, HALF, layout=row_s)
    diag = start_m * (2 * HALF // BLOCK_N)
    q = q_smem.index(c)
    zero = gl.zeros([HALF, BLOCK_N], gl.float32, s_layout)
    mbarrier.wait(q_bar.index(c), 0)
    mbarrier.wait(k_bar.index(0), 0)
    qk = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), zero, use_acc=False, is_async=True)
    qk = warpgroup_mma_wait(0, deps=[qk])
    m_i = gl.full([HALF], -float("inf"), gl.float32, row_s)
    l_i = gl.zeros([HALF], gl.float32, row_s)
    p, m_i, l_i, alpha = _softmax_tile(qk, m_i, l_i, scale, rows, 0, diag, CAUSAL, BLOCK_N, s_layout)
    p = gl.convert_layout(p.to(dtype), p_layout)
    acc = gl.zeros([HALF, HEAD_DIM], gl.float32, o_layout)
    if EARLY:  # S_{j+1} issued as soon as S_j's softmax is done, before waiting for P_{j-1} V_{j-1}
        # K_{j+1} is awaited while tile j - 1's slot is still held: the ring needs a third slot
        gl.static_assert(STAGES >= 3, "the early form needs STAGES >= 3")
        nxt = gl.minimum(tiles - 1, 1)
        mbarrier.wait(k_bar.index(nxt % STAGES), (nxt // STAGES) & 1)
        s_next = warpgroup_mma(q, k_smem.index(nxt % STAGES).permute((1, 0)), zero, use_acc=False, is_async=True)
        for j in range(1, tiles - 1):
            p, m_i, l_i, acc, s_next = _ws_step(q, k_smem, v_smem, k_bar, v_bar, empty, s_next, p, m_i, l_i, acc, scale,
                                            rows, j, diag, zero, True, CAUSAL, STAGES, BLOCK_N, s_layout, p_layout,
                                            row_o)
        if tiles > 1:
            p, m_i, l_i, acc, _last = _ws_step(q, k_smem, v_smem, k_bar, v_bar, empty, s_next, p, m_i, l_i, acc, scale,
                                            rows, tiles - 1, diag, zero, False, CAUSAL, STAGES, BLOCK_N, s_layout,
                                            p_layout, row_o)
        else:
            _last = warpgroup_mma_wait(0, deps=[s_next])  # tile 0 issued twice when it is the only one
    else:  # S_j and P_{j-1} V_{j-1} issued together, S_j waited for alone
        for j in range(1, tiles):
            slot = j % STAGES
            mbarrier.wait(k_bar.index(slot), (j // STAGES) & 1)
            qk = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), zero, use_acc=False, is_async=True)
            p, m_i, l_i, acc, qk = _ws_step(q, k_smem, v_smem, k_bar, v_bar, empty, qk, p, m_i, l_i, acc, scale,
                                            rows, j, diag, zero, False, CAUSAL, STAGES, BLOCK_N, s_layout, p_layout,
                                            row_o)
    last = (tiles - 1) % STAGES
    mbarrier.wait(v_bar.index(last), ((tiles - 1) // STAGES) & 1)
    acc = warpgroup_mma(p, v_smem.index(last), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=[acc])
    out = acc / gl.expand_dims(gl.convert_layout(l_i, row_o), 1)
    q.store(out.to(dtype))  # this warpgroup's own query rows, read for the last time above
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [q_row + c * HALF, 0], q)
    tma.store_wait(0)


@gluon.jit
def _flash_ws(q_desc, k_desc, v_desc, o_desc, scale, S, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
              EARLY: gl.constexpr, num_warps: gl.constexpr):
    """A producer warp and two consumer warpgroups that never wait for each other, only for the ring."""
    HALF: gl.constexpr = q_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    dtype: gl.constexpr = q_desc.dtype
    blocks = S // (2 * HALF)
    if CAUSAL:
        start_m = blocks - 1 - gl.program_id(0)
        tiles = (start_m + 1) * (2 * HALF // BLOCK_N)
    else:
        start_m = gl.program_id(0)
        tiles = S // BLOCK_N
    row0 = gl.program_id(1) * S
    q_row = row0 + start_m * 2 * HALF
    q_smem = gl.allocate_shared_memory(dtype, [2, HALF, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_bar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(2):
        mbarrier.init(q_bar.index(c), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_bar.index(s), count=1)
        mbarrier.init(v_bar.index(s), count=1)
        mbarrier.init(empty.index(s), count=2)
    fence_async_shared()
    gl.warp_specialize([(_ws_consumer, (0, o_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, empty, scale, q_row,
                                        start_m, tiles, CAUSAL, STAGES, EARLY)),
                        (_ws_consumer, (1, o_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, empty, scale, q_row,
                                        start_m, tiles, CAUSAL, STAGES, EARLY)),
                        (_ws_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, empty,
                                        row0, q_row, tiles, STAGES))], [4, 1], [240, 24])


def shape(head_dim: int, causal: bool) -> tuple[int, int, int, bool]:
    """(BLOCK_M, BLOCK_N, STAGES, EARLY): 128-row blocks over the two consumer warpgroups, 128-key tiles
    three deep (227 KiB of shared memory at head 128); EARLY issues S_{j+1} before P_{j-1} V_{j-1} is
    waited for (bench/gpu_attention.py measures both)."""
    return 128, 128, 3, False


def attention(q, k, v, out, batch: int, heads: int, seq: int, head_dim: int, causal: bool,
              config: tuple | None = None):
    """out = softmax(q k^T / sqrt(d)) v for contiguous 16-bit [batch, heads, seq, head_dim] on Hopper
    (attention.route() chose 'gluon'); `config` overrides shape() for measurements."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    bm, bn, stages, early = config or shape(head_dim, causal)
    gdt = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16
    rows = batch * heads * seq
    descs = []
    for t, block in ((q, bm // 2), (k, bn), (v, bn), (out, bm // 2)):
        layout = gl.NVMMASharedLayout.get_default_for([block, head_dim], gdt)
        descs.append(TensorDescriptor(t, [rows, head_dim], [head_dim, 1], [block, head_dim], layout))
    scale = math.log2(math.e) / math.sqrt(head_dim)
    _flash_ws[(triton.cdiv(seq, bm), batch * heads)](*descs, scale, seq, CAUSAL=causal, STAGES=stages,
                                                     EARLY=early, num_warps=4)
    return out
