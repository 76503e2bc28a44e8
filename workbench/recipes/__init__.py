"""Recipes: hand-written schedules of a workload for a target.

A recipe is a function that takes a workload's shape keywords (``wb.workloads.get(name,
**shape)``) and returns a ``Schedule`` written by hand, step by step, for one kind of target. The
bench times recipes beside vendor libraries, the course reads them as worked examples, and the
tests check the backends on them; nothing in the engine depends on them.

* :mod:`.gpu`: CUDA schedules (shared-memory tiles, cross-thread reductions, tensor cores).
"""
