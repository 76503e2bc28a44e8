"""Measure candidates on Dask distributed workers (extra ``dist``; see docs/distributed.md).

    runner = wb.tune.DaskRunner("tcp://scheduler:8786")        # or a distributed.Client
    db = wb.tune(func, trials=256, runner=runner)              # records land in the local db

Each candidate is one Dask task. On the Dask worker it is built and timed by a
:class:`~workbench.tune.runner.LocalRunner` with one measurement process, kept for the life of
that Dask worker: a candidate that crashes or hangs fails alone, with its reason, exactly as on
this machine, and the Dask worker survives it. A Dask worker that dies (its machine lost, its
process killed) is Dask's business: the scheduler requeues the candidates it held on the other
workers, and a candidate whose workers died ``allowed-failures`` times (Dask's setting, 3 by
default) fails as ``run_error``. Nothing else of the batch is lost.

One measurement at a time per Dask worker process (a lock), so timings on one machine do not
disturb each other: start one worker per host with ``--nthreads 1`` (``--nworkers N`` measures N
candidates side by side on that host, each distorting the others' timings).

``distributed`` is imported when a DaskRunner is created, never by ``import workbench``.
"""

from __future__ import annotations

import threading
from typing import Any, Optional, Sequence

from .measure import MeasureConfig
from .runner import LocalRunner, MeasureInput, MeasureInterrupted, MeasureResult, Runner, Task

#: seconds to wait for the scheduler at an address before giving up
CONNECT_TIMEOUT = 10.0
#: seconds to wait for a Dask worker to join before a batch fails with a clear error
WAIT_FOR_WORKERS = 60.0


class DaskRunner(Runner):
    """Build and time candidates on the workers of a Dask cluster.

    ``client_or_address``: a ``distributed.Client``, or a scheduler address such as
    ``"tcp://host:8786"`` (this runner then owns its client and closes it). ``measure``: the
    time limits and timing settings, applied by the :class:`LocalRunner` of each Dask worker.
    """

    def __init__(
        self,
        client_or_address: Any,
        *,
        measure: Optional[MeasureConfig] = None,
        connect_timeout: Optional[float] = None,
    ):
        try:
            import distributed
        except ImportError as exc:
            raise ImportError(
                "DaskRunner needs Dask distributed: pip install 'workbench[dist]' (or 'dask[distributed]')"
            ) from exc
        self._distributed = distributed
        if isinstance(client_or_address, distributed.Client):
            self.client, self._own_client = client_or_address, False
        elif isinstance(client_or_address, str):
            try:
                self.client = distributed.Client(
                    client_or_address, timeout=connect_timeout or CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError) as exc:
                raise ConnectionError(
                    f"DaskRunner: cannot reach a Dask scheduler at {client_or_address!r} ({exc})"
                ) from None
            self._own_client = True
        else:
            raise TypeError(
                f"DaskRunner: expected a distributed.Client or a scheduler "
                f"address like 'tcp://host:8786', got {client_or_address!r}"
            )
        #: the scheduler's address, for messages
        self.address = str(getattr(self.client.scheduler, "address", client_or_address))
        self.config = measure or MeasureConfig()
        self._tasks: dict[str, Any] = {}  # Task.key -> its future on the cluster

    def __repr__(self) -> str:
        return f"DaskRunner({self.address!r})"

    def measure(
        self, inputs: Sequence[MeasureInput], config: Optional[MeasureConfig] = None
    ) -> list[MeasureResult]:
        if not inputs:
            return []
        try:
            self.client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS)
        except TimeoutError:
            raise RuntimeError(
                f"DaskRunner: no Dask worker joined the scheduler "
                f"{self.address} within "
                f"{WAIT_FOR_WORKERS:g} s"
            ) from None
        futures = [
            self.client.submit(
                _measure_on_worker,
                self._on_cluster(inp.task),
                inp.func,
                self.config,
                config,
                pure=False,
            )
            for inp in inputs
        ]
        index = {f.key: k for k, f in enumerate(futures)}
        results: list[Optional[MeasureResult]] = [None] * len(inputs)
        try:
            for future in self._distributed.as_completed(futures):
                results[index[future.key]] = self._result_of(future)
        except KeyboardInterrupt:  # Ctrl-C: drop the unfinished, keep what finished
            self.client.cancel(futures)
            raise MeasureInterrupted(results) from None
        except BaseException:  # a lost scheduler: leave no candidate running
            self.client.cancel(futures)
            raise
        return results  # type: ignore[return-value]

    def _on_cluster(self, task: Task) -> Any:
        """The task as a future on the cluster, sent once (its inputs and expected outputs
        computed here first, so each Dask worker need not run the numpy reference). Not
        scattered: a scattered value dies with the worker holding it, while the result of a
        task in the graph is recomputed elsewhere, and the candidates needing it survive."""
        if task.key not in self._tasks:
            task.data()
            self._tasks[task.key] = self.client.submit(_identity, task, key=f"task-{task.key}")
        return self._tasks[task.key]

    def _result_of(self, future: Any) -> MeasureResult:
        try:
            return future.result()
        except self._distributed.KilledWorker as exc:
            return MeasureResult(
                "run_error",
                error=f"Dask workers died while measuring it (requeued until Dask's allowed-failures): {exc}",
            )
        except Exception as exc:  # the task failed on the worker outside the LocalRunner
            return MeasureResult("run_error", error=f"on a Dask worker: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        for future in self._tasks.values():
            future.release()
        self._tasks.clear()
        if self._own_client:
            self.client.close()


# ---------------------------------------------------------------------------------------------
# on the Dask worker


def _identity(value: Any) -> Any:
    return value


_RUNNERS: dict[MeasureConfig, tuple[LocalRunner, threading.Lock]] = {}
_RUNNERS_LOCK = threading.Lock()


def _measure_on_worker(
    task: Task, func: Any, settings: MeasureConfig, config: Optional[MeasureConfig]
) -> MeasureResult:
    """Measure one candidate with this process's LocalRunner for the DaskRunner's ``settings``
    (started at the first call); ``config``: settings for this call only."""
    with _RUNNERS_LOCK:
        if settings not in _RUNNERS:
            _RUNNERS[settings] = (LocalRunner(workers=1, measure=settings), threading.Lock())
        runner, lock = _RUNNERS[settings]
    with lock:
        return runner.measure([MeasureInput(task, func)], config)[0]
