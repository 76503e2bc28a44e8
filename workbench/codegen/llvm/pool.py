"""Workbench's own thread pool for parallel regions (``wb_parallel``), compiled once per process.

Why not libgomp's. ``GOMP_parallel`` returns only when every thread of the team has checked in,
including one that the OS has not run yet. On a machine shared with other work (two cores, and
another process at the same real-time priority as the one timing: what two benchmarks run with
``chrt`` at once do) the woken worker can sit in its core's run queue behind that process for a
whole round-robin slice (100 ms): GMM-128 ran 200 ms per call instead of 0.010 ms, for seconds at
a time, and only in some processes (where both threads had landed on the contended core). The
caller has by then done every chunk itself; it waits only for the check-in.

Here a region waits only for the workers that *joined* it, and a worker that wakes after the
region closed does not join. The protocol, on globals of this module (each on its own cache
line, the ``busy`` lock aside)::

    caller (wb_parallel)                         worker (wb_worker, forever)
    busy 0 -> 1, else run fn(closure) alone      wait until gen changes (spin, then futex)
    fn, closure, want = n - 1; open = 1          active += 1
    gen += 1; wake sleepers                      if open and it is among the first `want`:
    fn(closure)            # claims chunks           fn(closure)  # the job's fn, closure
    open = 0                                     active -= 1; last one out wakes the caller
    wait until active == 0 (spin, then futex)
    busy = 0

All of these are sequentially consistent, so a worker either sees ``open == 0`` (and never
touches the closure, which lives on the caller's stack) or is counted in ``active`` before the
caller looks. ``fn`` is the region's trampoline (:mod:`.parallel`): it claims chunks from the
closure's counter until none is left, so whichever threads run do all the work. A thread that
finds the pool busy (another Python thread's kernel, kernels release the GIL) runs its region
alone. Waiting spins :data:`SPIN_ITERATIONS` times (``pause``; ~8 us) before sleeping on a futex,
the bound :mod:`.runtime` chose for libgomp (see its table). Linux on x86-64 and AArch64 only
(the futex system call's number); elsewhere parallel loops run serially.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import sys
from typing import Optional

import llvmlite.binding as llvm

#: spin iterations before a waiting thread sleeps (the waits of a region's start and end)
SPIN_ITERATIONS = 300
#: the futex system call's number per machine (Linux)
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}
#: the pool's entry point, as generated code calls it
ENTRY = "wb_parallel"

_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129


def _ir(sys_futex: int, pause: tuple[str, str]) -> str:
    """The pool's module (textual IR: atomics and the futex calls read best this way)."""
    g = "\n".join(
        f"@{name} = internal global {t} {init}, align 64"
        for name, t, init in [
            ("gen", "i32", "0"),
            ("open", "i32", "0"),
            ("active", "i32", "0"),
            ("want", "i32", "0"),
            ("mwait", "i32", "0"),
            ("sleeping", "i32", "0"),
            ("busy", "i32", "0"),
            ("nworkers", "i32", "0"),
            ("fn", "ptr", "null"),
            ("closure", "ptr", "null"),
        ]
    )
    return f"""
{g}
@wb_pool_spin = global i32 {SPIN_ITERATIONS}, align 64
@wb_pool_joined = global i64 0, align 64
@hold = internal global i32 0, align 64
@holders = internal global i32 0, align 64

declare i64 @syscall(i64, ...)
declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
{pause[1]}

define internal void @relax() {{
  {pause[0]}
  ret void
}}

; spin until *%p != %v, then sleep on the futex until it is (or a spurious wake-up)
define internal void @wait_ne(ptr %p, i32 %v, ptr %sleepers) {{
entry:
  br label %spin
spin:
  %i = phi i32 [0, %entry], [%i1, %again], [0, %woke]
  %x = load atomic i32, ptr %p seq_cst, align 4
  %ch = icmp ne i32 %x, %v
  br i1 %ch, label %done, label %more
more:
  %i1 = add i32 %i, 1
  %lim = load atomic i32, ptr @wb_pool_spin monotonic, align 4
  %go = icmp slt i32 %i1, %lim
  br i1 %go, label %again, label %sleep
again:
  call void @relax()
  br label %spin
sleep:
  %s0 = atomicrmw add ptr %sleepers, i32 1 seq_cst
  %y = load atomic i32, ptr %p seq_cst, align 4
  %still = icmp eq i32 %y, %v
  br i1 %still, label %futex, label %woke
futex:
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr %p, i32 {_FUTEX_WAIT_PRIVATE}, i32 %v, ptr null)
  br label %woke
woke:
  %s1 = atomicrmw sub ptr %sleepers, i32 1 seq_cst
  br label %spin
done:
  ret void
}}

define internal ptr @wb_worker(ptr %arg) {{
entry:
  %g0 = load atomic i32, ptr @gen seq_cst, align 4
  br label %wait
wait:
  %last = phi i32 [%g0, %entry], [%g, %leave], [%g, %maybe_wake], [%g, %wake]
  call void @wait_ne(ptr @gen, i32 %last, ptr @sleeping)
  call void @wait_ne(ptr @hold, i32 1, ptr @holders)
  %g = load atomic i32, ptr @gen seq_cst, align 4
  %before = atomicrmw add ptr @active, i32 1 seq_cst
  %op = load atomic i32, ptr @open seq_cst, align 4
  %w = load atomic i32, ptr @want seq_cst, align 4
  %isopen = icmp ne i32 %op, 0
  %room = icmp slt i32 %before, %w
  %join = and i1 %isopen, %room
  br i1 %join, label %run, label %leave
run:
  %f = load atomic ptr, ptr @fn seq_cst, align 8
  %c = load atomic ptr, ptr @closure seq_cst, align 8
  %j = atomicrmw add ptr @wb_pool_joined, i64 1 monotonic
  call void %f(ptr %c)
  br label %leave
leave:
  %prev = atomicrmw sub ptr @active, i32 1 seq_cst
  %last_out = icmp eq i32 %prev, 1
  br i1 %last_out, label %maybe_wake, label %wait
maybe_wake:
  %mw = load atomic i32, ptr @mwait seq_cst, align 4
  %waiting = icmp ne i32 %mw, 0
  br i1 %waiting, label %wake, label %wait
wake:
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr @active, i32 {_FUTEX_WAKE_PRIVATE}, i32 1)
  br label %wait
}}

; start workers until there are %n; the number running
define internal i32 @grow(i32 %n) {{
entry:
  %tid = alloca i64, align 8
  br label %check
check:
  %have = load i32, ptr @nworkers, align 4
  %enough = icmp sge i32 %have, %n
  br i1 %enough, label %done, label %start
start:
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @wb_worker, ptr null)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %started, label %done
started:
  %t = load i64, ptr %tid, align 8
  %d = call i32 @pthread_detach(i64 %t)
  %have1 = add i32 %have, 1
  store i32 %have1, ptr @nworkers, align 4
  br label %check
done:
  %out = load i32, ptr @nworkers, align 4
  ret i32 %out
}}

; tests: 1 keeps woken workers from joining, as if the OS had not run them yet
define void @wb_pool_hold(i32 %on) {{
  store atomic i32 %on, ptr @hold seq_cst, align 4
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr @hold, i32 {_FUTEX_WAKE_PRIVATE}, i32 2147483647)
  ret void
}}

define void @{ENTRY}(ptr %f, ptr %c, i32 %n) {{
entry:
  %many = icmp sgt i32 %n, 1
  br i1 %many, label %lock, label %alone
lock:
  %pair = cmpxchg ptr @busy, i32 0, i32 1 seq_cst seq_cst
  %got = extractvalue {{ i32, i1 }} %pair, 1
  br i1 %got, label %grow, label %alone
grow:
  %need = sub i32 %n, 1
  %have = call i32 @grow(i32 %need)
  %fits = icmp sle i32 %need, %have
  %w = select i1 %fits, i32 %need, i32 %have
  %any = icmp sgt i32 %w, 0
  br i1 %any, label %publish, label %unlock_alone
unlock_alone:
  store atomic i32 0, ptr @busy seq_cst, align 4
  br label %alone
publish:
  store atomic ptr %f, ptr @fn seq_cst, align 8
  store atomic ptr %c, ptr @closure seq_cst, align 8
  store atomic i32 %w, ptr @want seq_cst, align 4
  store atomic i32 1, ptr @open seq_cst, align 4
  %g = atomicrmw add ptr @gen, i32 1 seq_cst
  %sl = load atomic i32, ptr @sleeping seq_cst, align 4
  %wake = icmp sgt i32 %sl, 0
  br i1 %wake, label %wake_all, label %work
wake_all:
  %r = call i64 (i64, ...) @syscall(i64 {sys_futex}, ptr @gen, i32 {_FUTEX_WAKE_PRIVATE}, i32 2147483647)
  br label %work
work:
  call void %f(ptr %c)
  store atomic i32 0, ptr @open seq_cst, align 4
  br label %join
join:
  %a = load atomic i32, ptr @active seq_cst, align 4
  %idle = icmp eq i32 %a, 0
  br i1 %idle, label %finish, label %wait
wait:
  call void @wait_ne(ptr @active, i32 %a, ptr @mwait)
  br label %join
finish:
  store atomic i32 0, ptr @busy seq_cst, align 4
  ret void
alone:
  call void %f(ptr %c)
  ret void
}}
"""


def _pause() -> tuple[str, str]:
    """The spin-wait hint of this machine: (call, declaration)."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return "call void @llvm.x86.sse2.pause()", "declare void @llvm.x86.sse2.pause()"
    if machine in ("aarch64", "arm64"):
        return "call void @llvm.aarch64.hint(i32 1)", "declare void @llvm.aarch64.hint(i32)"
    return "", ""


@functools.cache
def _compile() -> Optional[tuple[int, int, int, int]]:
    """Compile the pool (once per process): the addresses of ``wb_parallel``, the spin bound
    and the counter of regions workers joined; None where the pool cannot run."""
    sys_futex = _SYS_FUTEX.get(platform.machine().lower())
    if not sys.platform.startswith("linux") or sys_futex is None:
        return None
    from .jit import _initialize  # libraries loaded, targets initialized

    _initialize()
    mod = llvm.parse_assembly(_ir(sys_futex, _pause()))
    mod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2, codemodel="jitdefault")
    mod.triple = tm.triple
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    fns, values = (ENTRY, "wb_pool_hold"), ("wb_pool_spin", "wb_pool_joined")
    entry, hold = (engine.get_function_address(n) for n in fns)
    spin, joined = (engine.get_global_value_address(n) for n in values)
    addresses = (entry, spin, joined, hold)
    # the workers run this code until the process ends: never free it (not even at exit, when
    # the engine's finalizer would unmap it under a sleeping worker)
    engine.detach()
    llvm.add_symbol(ENTRY, addresses[0])
    return addresses


def available() -> bool:
    """Whether parallel regions can run on the pool in this process."""
    return _compile() is not None


def set_spin(iterations: int) -> None:
    """Spin iterations before a waiting thread of the pool sleeps (0: sleep at once)."""
    ctypes.c_int32.from_address(_addresses()[1]).value = max(0, int(iterations))


def regions_joined() -> int:
    """How many times a worker joined a region so far (all regions of the process)."""
    return ctypes.c_int64.from_address(_addresses()[2]).value


def hold_workers(on: bool) -> None:
    """Tests: while on, woken workers wait before joining a region, as if the OS had not run
    them yet (regions must then finish on their callers alone)."""
    ctypes.CFUNCTYPE(None, ctypes.c_int32)(_addresses()[3])(1 if on else 0)


def _addresses() -> tuple[int, int, int, int]:
    addresses = _compile()
    if addresses is None:
        raise RuntimeError("workbench's thread pool needs Linux on x86-64 or AArch64")
    return addresses
