"""The low-level IR: flat instructions over buffers, with lifetimes, views and in-place ops."""

from compiler.lowir.ir import IN, INOUT, OUT, Instr, LowIR, Operand, Storage
from compiler.lowir.lower import lower
from compiler.lowir.verify import verify_lowir

__all__ = ["IN", "INOUT", "OUT", "Instr", "LowIR", "Operand", "Storage", "lower", "verify_lowir"]
