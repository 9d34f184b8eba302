"""Where trials run: Ray tasks on a local instance or a cluster, or this process in turn.

Each trial is one Ray task (`run_trial`): it loads the problem once per worker process and
measures one configuration. A task whose worker dies (killed, out of memory, a node lost) is
run again by Ray (`max_retries`); a configuration that fails to quantize or compile is a
result, not a retry. Ray and Optuna are the optional extra `kiln[explore]`.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator

from compiler.errors import KilnError

INSTALL_HINT = "pip install 'kiln[explore]' (Ray and Optuna)"
RETRIES = 5  # runs of a trial whose worker died, before it counts as failed


def require(module: str) -> None:
    """Import `module` or say in one sentence how to install it."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        raise KilnError(f"kiln explore needs {module}, which is not installed: "
                        f"{INSTALL_HINT}") from None


def run_trial(spec_json: dict, config_json: dict) -> dict:
    """Measure one configuration (in whichever process runs it); a JSON result.

    {"measurement": ..., "overrides": the profile overrides that reproduce it, "worker": ...,
    "seconds": ...}, or {"error": one sentence, ...}.
    """
    from compiler.explore.config import Config
    from compiler.explore.measure import measure, overrides
    from compiler.explore.problem import ProblemSpec, cached_problem

    start = time.perf_counter()
    worker = {"pid": os.getpid(), "host": socket.gethostname()}
    try:
        problem = cached_problem(ProblemSpec.from_json(spec_json))
        config = Config.from_json(config_json)
        chosen = overrides(problem, config)  # computed once: the record keeps them too
        measured = measure(problem, config, chosen)
    except KilnError as exc:
        return {"error": str(exc), "worker": worker,
                "seconds": round(time.perf_counter() - start, 3)}
    return {"measurement": measured.to_json(), "overrides": chosen, "worker": worker,
            "seconds": round(time.perf_counter() - start, 3)}


def ray_trial(spec_json: dict, config_json: dict) -> dict:
    """`run_trial` as a Ray task: the worker also names the task.

    With the task's id, `ray list tasks` shows every attempt at a trial (a retry after its
    worker died is another attempt of the same task).
    """
    import ray

    result = run_trial(spec_json, config_json)
    result["worker"]["task"] = ray.get_runtime_context().get_task_id()
    return result


class InProcess:
    """Trials one after another in this process (no Ray): for a quick look and for tests.

    `task(spec_json, config_json) -> dict` measures one trial (Explore's `run_trial` by
    default; the tuner passes its own).
    """

    _task: Callable[[dict, dict], dict] | None = None

    def __init__(self, task: Callable[[dict, dict], dict] | None = None) -> None:
        self._task = task

    def run(self, spec_json: dict, configs: list[dict],
            cancelled: Callable[[], bool] = lambda: False) -> Iterator[tuple[int, dict]]:
        """(index, result) for each configuration, as each finishes."""
        for i, config in enumerate(configs):
            if cancelled():
                return
            yield i, (self._task or run_trial)(spec_json, config)

    def close(self) -> None:
        """Nothing to stop."""


class Lazy:
    """An executor made on first use: a resumed run with every result cached starts no Ray."""

    def __init__(self, make: Callable[[], object]) -> None:
        self._make, self._made = make, None

    def run(self, spec_json: dict, configs: list[dict],
            cancelled: Callable[[], bool] = lambda: False) -> Iterator[tuple[int, dict]]:
        """The made executor's `run` (nothing is made for no configurations)."""
        if not configs:
            return iter(())
        if self._made is None:
            self._made = self._make()
        return self._made.run(spec_json, configs, cancelled)

    def close(self) -> None:
        """Close the made executor, if any."""
        if self._made is not None:
            self._made.close()


class RayExecutor:
    """Trials as Ray tasks: a local instance sized to the cores, or the cluster at `address`.

    `address` is "auto", "HOST:PORT" or "ray://HOST:PORT"; `workers` bounds the CPUs a local
    instance takes (default: every core); `task` is the trial function (`InProcess`'s), run in
    a Ray worker.
    """

    def __init__(self, address: str | None = None, workers: int | None = None,
                 task: Callable[[dict, dict], dict] | None = None) -> None:
        require("ray")
        import logging

        import ray

        self._ray = ray
        self._owned = not ray.is_initialized()
        # ray.init makes SIGTERM exit at once; the caller's handler (save, then stop) stays.
        stop = signal.getsignal(signal.SIGTERM)
        if self._owned:
            kwargs = dict(include_dashboard=False, log_to_driver=False,
                          logging_level=logging.WARNING, configure_logging=False)
            try:
                if address:
                    ray.init(address=address, **kwargs)
                else:
                    # A private instance on loopback: no token written to the user's home
                    # (it would make their later `ray start` clusters demand one). "local":
                    # never a cluster that RAY_ADDRESS or Ray's address file names.
                    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
                    ray.init(address="local", num_cpus=workers or os.cpu_count() or 1,
                             _node_ip_address="127.0.0.1", **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                raise KilnError(f"could not start or reach {where}: "
                                f"{str(exc).splitlines()[0] if str(exc) else exc}") from None
            finally:
                if threading.current_thread() is threading.main_thread() and stop is not None:
                    signal.signal(signal.SIGTERM, stop)
        self._task = ray.remote(num_cpus=1, max_retries=RETRIES,
                                name="run_trial" if task is None else task.__name__)(
                                    ray_trial if task is None else task)

    def run(self, spec_json: dict, configs: list[dict],
            cancelled: Callable[[], bool] = lambda: False) -> Iterator[tuple[int, dict]]:
        """(index, result) for each configuration, as each finishes; stops when cancelled."""
        ray = self._ray
        spec_ref = ray.put(spec_json)
        pending = {self._task.remote(spec_ref, config): i for i, config in enumerate(configs)}
        try:
            while pending:
                if cancelled():
                    return
                done, _ = ray.wait(list(pending), num_returns=1, timeout=0.25)
                for ref in done:
                    index = pending.pop(ref)
                    try:
                        yield index, ray.get(ref)
                    except ray.exceptions.RayError as exc:  # retries exhausted
                        text = str(exc).strip().splitlines()
                        yield index, {"error": f"the trial's worker failed {RETRIES + 1} "
                                               f"times: {text[0] if text else type(exc).__name__}"}
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        """Stop the local instance this executor started (a cluster is left running)."""
        if self._owned and self._ray.is_initialized():
            self._ray.shutdown()
