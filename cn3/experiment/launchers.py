"""What starts a grid's cells: processes on this machine, Ray tasks, or Slurm jobs through submitit.

Every launcher runs :func:`cn3.experiment.cell.run_cell`, so a cell's run directory is the same
whoever trained it; the runner (:mod:`cn3.experiment.runner`) keeps everything else. A launcher only
starts a cell (:meth:`Launcher.start`), reports which have ended with what exit code
(:meth:`Launcher.finished`), and stops them so that they save ``latest.pt`` (:meth:`Launcher.stop`).

Ray and submitit are optional extras (``cn3[ray]``, ``cn3[slurm]``); both run cells on other
machines, so ``--out``, the data (``CN3_DATA``) and cn3 itself must be at the same paths on every
worker (a shared file system).
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cn3.config import ConfigError
from cn3.experiment.cell import LOG, cell_to_json, describe_worker, read_worker, run_cell
from cn3.experiment.spec import Cell

#: Seconds a stopped grid waits for its cells to save ``latest.pt`` (Slurm's own KillWait is 30 s).
STOP_WAIT = 120


@dataclass(eq=False)
class Job:
    """A started cell.

    Attributes:
        handle: the launcher's own (a ``Popen``, a Ray ``ObjectRef``, a ``submitit.Job``).
        log_offset: the size of ``RUN/experiment.log`` when the cell was started: its attempt's lines follow.
        worker: where it trains, once known (a queued Ray task or Slurm job has no worker yet).
        rc: its exit code once it ended (:func:`run_cell`'s), ``None`` if it ended without one.
        error: why it ended without one (a worker lost, a job cancelled by the cluster).
    """

    cell: Cell
    handle: object
    log_offset: int
    worker: str | None = None
    rc: int | None = None
    error: str = ""

    def find_worker(self) -> str | None:
        """The worker the cell's log names (read until it does)."""
        if self.worker is None:
            self.worker = read_worker(self.cell.run_dir / LOG, self.log_offset)
        return self.worker


def _log_size(cell: Cell) -> int:
    log = cell.run_dir / LOG
    return log.stat().st_size if log.is_file() else 0


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"


def _require(module: str, launcher: str, extra: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"--launcher {launcher} needs {module}, which is not installed: "
                          f"pip install 'cn3[{extra}]'") from None


class Launcher:
    """The interface; :class:`LocalLauncher`, :class:`RayLauncher` and :class:`SlurmLauncher` fill it."""

    name = ""
    #: seconds between looks at the running cells
    poll_seconds = 0.2

    def default_threads(self, jobs: int | None) -> int:
        """torch threads per cell when ``--threads`` is not given."""
        raise NotImplementedError

    def describe(self, jobs: int | None, threads: int) -> str:
        """One line for the dry run: where the cells go and what each gets."""
        raise NotImplementedError

    def open(self) -> None:
        """Connect to the engine (once; :meth:`start` does it too): a dry run never needs to."""

    def start(self, cell: Cell, threads: int) -> Job:
        raise NotImplementedError

    def finished(self, jobs: list[Job]) -> list[Job]:
        """Those of ``jobs`` that have ended, their ``rc`` (or ``error``) set."""
        raise NotImplementedError

    def stop(self, jobs: list[Job]) -> None:
        """Ask each running cell to save ``latest.pt`` and stop, drop the queued ones, and wait."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the launcher started for the grid."""


class LocalLauncher(Launcher):
    """A process per cell on this machine (``python -m cn3.experiment.cell``), in a session of its own:
    a terminal's Ctrl-C reaches the runner only, which stops each cell with SIGTERM."""

    name = "local"

    def default_threads(self, jobs: int | None) -> int:
        return max(1, (os.cpu_count() or 1) // max(jobs or 1, 1))

    def describe(self, jobs: int | None, threads: int) -> str:
        return f"{jobs or 1} at a time on this machine, {threads} thread(s) each"

    def start(self, cell: Cell, threads: int) -> Job:
        offset = _log_size(cell)
        with open(cell.run_dir / LOG, "a", encoding="utf-8") as log:  # also what fails before run_cell starts
            process = subprocess.Popen([sys.executable, "-m", "cn3.experiment.cell", cell_to_json(cell), str(threads)],
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return Job(cell, process, offset, worker=socket.gethostname())

    def finished(self, jobs: list[Job]) -> list[Job]:
        ended = []
        for job in jobs:
            job.rc = job.handle.poll()
            if job.rc is not None:
                ended.append(job)
        return ended

    def stop(self, jobs: list[Job]) -> None:
        for job in jobs:
            job.handle.send_signal(signal.SIGTERM)  # the training loop saves latest.pt and exits
        for job in jobs:
            job.handle.wait()


def _ray_cell(cell: Cell, threads: int, workdir: str) -> int:
    """A cell as a Ray task: it may use the GPUs Ray assigned it (a fraction of one is that GPU), none
    when it asked for none (Ray leaves CUDA_VISIBLE_DEVICES alone then, and a CPU cell on a GPU node
    would take a GPU nobody scheduled)."""
    import ray

    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in ray.get_gpu_ids())
    node = ray.get_runtime_context().get_node_id()[:8]
    return run_cell(cell, threads, workdir, describe_worker(f"ray node {node}"))


class RayLauncher(Launcher):
    """Each cell a Ray task with ``cpus`` CPUs and ``gpus`` GPUs (a fraction shares a GPU), in a fresh
    worker process (``max_calls=1``: a cell's threads, CUDA memory and log redirection end with it).

    Connects to ``address`` (else ``$RAY_ADDRESS``, else a Ray started for the grid and stopped after;
    one this process already started is used as is). A task whose worker dies is not retried: the cell
    is reported failed and continues from ``latest.pt`` next time. Workers get this process's ``CN3_*``
    variables.
    """

    name = "ray"
    poll_seconds = 0.5

    def __init__(self, address: str | None = None, cpus: float = 1, gpus: float = 0) -> None:
        self.ray = _require("ray", "ray", "ray")
        self.address, self.cpus, self.gpus = address, cpus, gpus
        self.task = None
        self.started = False

    def open(self) -> None:
        import logging

        if self.task is not None:
            return
        if not self.ray.is_initialized():
            # cells write their own logs: the workers' output on this console would break the live table
            self.ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
            self.started = True
        self.task = self.ray.remote(max_calls=1, max_retries=0)(_ray_cell)

    def default_threads(self, jobs: int | None) -> int:
        return max(1, int(self.cpus))

    def describe(self, jobs: int | None, threads: int) -> str:
        cluster = self.address or os.environ.get("RAY_ADDRESS") or "a Ray started on this machine"
        return (f"Ray tasks on {cluster}{f', {jobs} at a time' if jobs else ''}: {self.cpus:g} CPU, "
                f"{self.gpus:g} GPU and {threads} thread(s) each")

    def start(self, cell: Cell, threads: int) -> Job:
        self.open()
        offset = _log_size(cell)
        env = {k: v for k, v in os.environ.items() if k.startswith("CN3_")}
        ref = self.task.options(name=cell.name, num_cpus=self.cpus, num_gpus=self.gpus,
                                runtime_env={"env_vars": env} if env else None).remote(cell, threads, os.getcwd())
        return Job(cell, ref, offset)

    def finished(self, jobs: list[Job]) -> list[Job]:
        if not jobs:
            return []
        by_ref = {job.handle: job for job in jobs}
        ready, _ = self.ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
        for ref in ready:
            job = by_ref[ref]
            try:
                job.rc = self.ray.get(ref)
            except self.ray.exceptions.TaskCancelledError:
                job.rc = 130
            except self.ray.exceptions.RayError as err:  # the worker died, or its node
                job.error = _first_line(err)
        return [by_ref[ref] for ref in ready]

    def stop(self, jobs: list[Job]) -> None:
        for job in jobs:
            self.ray.cancel(job.handle)  # a KeyboardInterrupt in the task: the loop saves latest.pt
        if jobs:
            self.ray.wait([job.handle for job in jobs], num_returns=len(jobs), timeout=STOP_WAIT)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


def _as_sigterm(signum, frame):
    """Deliver the signal as SIGTERM, which the training loop turns into a stop between two updates
    (:class:`cn3.train.interrupts.Interrupts`: a checkpoint holds whole updates only); raising here would stop it
    mid-update."""
    os.kill(os.getpid(), signal.SIGTERM)


def _slurm_cell(cell: Cell, threads: int, workdir: str, gpus: int) -> int:
    """A cell as a Slurm job: a job that asked for no GPU is shown none (it may see its node's), and
    submitit's warning signal (SIGUSR2, before the time limit or at preemption) stops training as
    SIGTERM does, so the cell saves latest.pt instead of being ended mid-step.
    """
    if not gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    signal.signal(signal.SIGUSR2, _as_sigterm)
    job = os.environ.get("SLURM_JOB_ID")
    return run_cell(cell, threads, workdir, describe_worker(f"slurm job {job}" if job else ""))


class SlurmLauncher(Launcher):
    """Each cell a Slurm job through submitit: ``cpus`` CPUs, ``gpus`` whole GPUs, ``time`` minutes, on
    ``partition``, with any other sbatch option in ``options`` (``{"account": "proj", "mem": "16G"}``).

    submitit keeps each job's pickled call, its own stdout/stderr and result in ``folder`` (the cell's
    output goes to its ``RUN/experiment.log``). ``cluster="local"`` is submitit's local executor:
    the same jobs as processes on this machine, to try a grid before sending it to the cluster.
    """

    name = "slurm"
    poll_seconds = 2.0  # each look may ask Slurm (sacct) about every job

    def __init__(self, folder: Path, partition: str | None = None, time: int = 720, cpus: int = 1, gpus: int = 0,
                 options: dict[str, str] | None = None, cluster: str = "slurm") -> None:
        self.submitit = _require("submitit", "slurm", "slurm")
        self.folder, self.cluster, self.options = folder, cluster, dict(options or {})
        self.cpus, self.gpus, self.partition, self.time = cpus, gpus, partition, time
        self.executor = None

    def open(self) -> None:
        if self.executor is not None:
            return
        try:
            self.executor = self.submitit.AutoExecutor(folder=self.folder, cluster=self.cluster)
        except RuntimeError as err:  # no srun here: not a Slurm cluster's node
            raise ConfigError(f"--launcher slurm: {err}") from None
        parameters = {"timeout_min": self.time, "cpus_per_task": self.cpus, "gpus_per_node": self.gpus,
                      "tasks_per_node": 1, "nodes": 1}
        if self.partition:
            parameters["slurm_partition"] = self.partition
        if self.options:
            parameters["slurm_additional_parameters"] = self.options
        self.executor.update_parameters(**parameters)

    def default_threads(self, jobs: int | None) -> int:
        return self.cpus

    def describe(self, jobs: int | None, threads: int) -> str:
        where = f"partition {self.partition}" if self.partition else "the default partition"
        return (f"Slurm jobs on {where}{f', {jobs} at a time' if jobs else ''}: {self.cpus} CPU, {self.gpus} GPU, "
                f"{self.time} min and {threads} thread(s) each")

    def start(self, cell: Cell, threads: int) -> Job:
        self.open()
        offset = _log_size(cell)
        self.executor.update_parameters(name=f"cn3-{cell.name}")
        return Job(cell, self.executor.submit(_slurm_cell, cell, threads, os.getcwd(), self.gpus), offset)

    def finished(self, jobs: list[Job]) -> list[Job]:
        ended = []
        for job in jobs:
            if not job.handle.done():
                continue
            try:
                job.rc = job.handle.result()
            except self.submitit.core.utils.UncompletedJobError as err:  # killed, cancelled, out of memory
                job.error = _first_line(err)
            ended.append(job)
        return ended

    def stop(self, jobs: list[Job]) -> None:
        for job in jobs:
            job.handle.cancel(check=False)  # scancel: SIGTERM, which the training loop turns into latest.pt
        deadline = time.time() + STOP_WAIT
        while time.time() < deadline and not all(job.handle.done() for job in jobs):
            time.sleep(1)
