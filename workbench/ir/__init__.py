"""The IR: expressions, statements, buffers, functions, the compute DSL and analyses."""
from .buffer import Buffer, SCOPES
from .expr import (INTRINSICS, Add, And, BinaryOp, BufferLoad, Call, Cast, CmpOp, Div, EQ, Expr,
                   FloatImm, FloorDiv, FloorMod, GE, GT, IntImm, LE, LT, Max, Min, Mul, NE, Not, Or,
                   Select, Sub, Var, as_int, const, convert, is_const, is_float, is_int)
from .func import PrimFunc
from .stmt import (OPAQUE, REDUCE, SPATIAL, THREAD_TAGS, Allocate, Block, BlockRealize,
                   BufferRegion, BufferStore, Evaluate, For, ForKind, IfThenElse, IterVar, Range,
                   SeqStmt, Stmt, seq)
