"""The Triton backend: ISA programs as generated Triton kernels (PTX on a GPU, the interpreter on a CPU).

device.py holds device memory, source.py loads generated kernel source; the backend object lands next.
"""
