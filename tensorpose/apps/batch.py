"""``tensorpose batch``: every recording of a batch through the chosen steps, on Ray.

Find the recordings (:func:`tensorpose.io.recordings.find_recordings`: Pose2Sim's session /
participant / trial layout, or a manifest CSV), skip those whose outputs exist for the same
inputs and options (a digest beside each step's output), run the others through the steps of
:data:`COMMANDS` (the single commands' own functions and defaults, writing the same outputs
inside each trial folder, each committed through :class:`tensorpose.io.atomic.OutputFolder`),
and write ``batch.json`` at the batch root: the recordings done, skipped and failed, each
failure with its one-line reason.

On Ray (``pip install tensorpose[ray]``): without ``address`` a local Ray instance on this
machine's cores (and GPUs); with it, an existing cluster (the trial folders must be on storage
every node sees). The 2D model runs in a pool of ``workers`` actors (one GPU each when the
cluster has GPUs, else one CPU), each loading the model once; each recording's videos are
decoded by a streaming task on the model's node whose frames reach the model a few time steps
at a time while it decodes; the
CPU steps (sync, triangulate, kinematics) run as tasks. A worker that dies is restarted by Ray
and its recording run again (its outputs are committed whole or not at all); a recording that
fails is recorded and the others go on. Without Ray, or with ``local``, the same recipe runs
sequentially in this process.

Outputs inside each trial folder ``TRIAL`` (as ``tensorpose predict TRIAL/videos --model
blazepose --out TRIAL/pose``, ``tensorpose sync TRIAL/pose/openpose --calib CALIB --out
TRIAL/sync``, ``tensorpose triangulate TRIAL/pose/openpose --calib CALIB --out TRIAL/pose-3d
[--sync TRIAL/sync/sync.json]`` write them): ``pose/``, ``sync/``, ``pose-3d/``,
``kinematics/``; and ``TRIAL/<output>.digest.json`` per step.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, MissingFileError
from ..io.recordings import Recording, find_recordings

__all__ = ["COMMANDS", "DEFAULT_STEPS", "STEPS", "BatchStep", "run_batch", "summary"]

STEPS = ("predict", "sync", "triangulate", "kinematics")
"""The steps in the order they run."""

DEFAULT_STEPS = ("predict", "triangulate")
"""``--steps`` when not given: synchronised cameras to 3D."""

CHUNK_STEPS = 2
"""Time steps (one frame of every camera each) a decoding task sends to the model at once."""

DECODE_AHEAD = 4
"""Chunks a decoding task may have decoded before the model took them (Ray's backpressure)."""

RETRIES = 3
"""Times a recording is run again after its worker died (a killed process or node)."""


# ---------------------------------------------------------------------- the steps
def _predict(rec: Recording, options: dict, overwrite: bool, models=None, decoded=None) -> dict:
    from .predict import load_models, predict

    opts = dict(options)
    load = {k: opts.pop(k) for k in ("checkpoint", "model", "detector", "device", "max_people")}
    pose, det = models if models is not None else load_models(**load)
    r = predict(rec.videos, pose, rec.folder / "pose", detector=det, overwrite=overwrite,
                inputs=(load["checkpoint"], load["detector"]), progress=False,
                max_people=load["max_people"], decoded=decoded, **opts)  # fmt: skip
    return {"frames": r.frames, "seconds": r.seconds}


def _sync(rec: Recording, options: dict, overwrite: bool) -> dict:
    from .sync import sync_folder

    sync_folder(rec.folder / "pose" / "openpose", rec.folder / "sync",
                calib_path=rec.calibration, overwrite=overwrite, **options)  # fmt: skip
    return {}


def _triangulate(rec: Recording, options: dict, overwrite: bool, synced: bool = False) -> dict:
    from .triangulate import triangulate_folder

    sync = rec.folder / "sync" / "sync.json" if synced else None
    triangulate_folder(rec.folder / "pose" / "openpose", rec.calibration,
                       rec.folder / "pose-3d", sync=sync, overwrite=overwrite,
                       **options)  # fmt: skip
    return {}


def _kinematics(rec: Recording, options: dict, overwrite: bool) -> dict:
    trcs = sorted((rec.folder / "pose-3d").glob("*.trc"))
    if not trcs:
        raise MissingFileError(f"{rec.folder / 'pose-3d'}: no TRC file (run --steps "
                               "triangulate first)")  # fmt: skip
    from .kinematics import kinematics_files

    kinematics_files(trcs, rec.folder / "kinematics", overwrite=overwrite, **options)
    return {}


@dataclass(frozen=True)
class BatchStep:
    """One step of a batch: the single command's ``function`` (its keyword defaults are the
    step's; ``fixed`` are the keywords the batch sets itself), its ``output`` folder inside the
    trial, ``run`` (what the batch calls: ``(recording, options, overwrite) -> counts``) and
    ``inputs`` (the files it reads, relative to the trial, besides the calibration)."""

    name: str
    output: str
    run: Callable
    inputs: tuple[str, ...]
    calibration: bool
    fixed: tuple[str, ...]
    defaults: dict = field(default_factory=dict)

    def function(self) -> Callable:
        """The single command's library function."""
        if self.name == "predict":
            from .predict import predict

            return predict
        if self.name == "sync":
            from .sync import sync_folder

            return sync_folder
        if self.name == "triangulate":
            from .triangulate import triangulate_folder

            return triangulate_folder
        from .kinematics import kinematics_files

        return kinematics_files

    def options(self) -> dict:
        """The step's options and their defaults: the single command's."""
        if self.name == "predict":
            from .predict import load_models, predict

            funcs: list[Callable] = [load_models, predict]
        else:
            funcs = [self.function()]
        out = {}
        for f in funcs:  # a function or two
            for name, p in inspect.signature(f).parameters.items():
                if p.default is not p.empty and name not in self.fixed:
                    out[name] = p.default
        return {**out, **self.defaults}


COMMANDS: dict[str, BatchStep] = {
    "predict": BatchStep("predict", "pose", _predict, ("videos",), False,
                         ("boxes", "overwrite", "inputs", "progress", "decoded"),
                         {"model": "blazepose"}),
    "sync": BatchStep("sync", "sync", _sync, ("pose/openpose",), True,
                      ("calib_path", "overwrite")),
    "triangulate": BatchStep("triangulate", "pose-3d", _triangulate, ("pose/openpose",), True,
                             ("sync", "overwrite")),
    "kinematics": BatchStep("kinematics", "kinematics", _kinematics, ("pose-3d",), False,
                            ("overwrite",), {"skip_unscalable": True}),
}  # fmt: skip
"""Each step -> the single command it runs, with that command's defaults (``predict``: the
shipped BlazePose, ``--model blazepose``; a ``checkpoint`` in the config runs a trained
model). ``sync`` before ``triangulate`` makes triangulate read its ``sync.json``."""


# ---------------------------------------------------------------------- options
def parse_steps(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``--steps`` (comma-separated, or a sequence) -> the steps, in :data:`STEPS` order."""
    if text is None:
        return DEFAULT_STEPS
    names = [s.strip() for s in text.split(",")] if isinstance(text, str) else list(text)
    bad = [s for s in names if s not in STEPS]
    if bad or not names:
        raise InputError(f"--steps must be a comma-separated subset of {','.join(STEPS)}, got "
                         f"{text!r}")  # fmt: skip
    if "kinematics" in names:  # OpenSim missing: one line before any recording runs
        from ..biomech import opensim_module

        opensim_module()
    return tuple(s for s in STEPS if s in names)


def step_options(steps: Sequence[str], config: str | os.PathLike | None) -> dict[str, dict]:
    """Each step's options: the single command's defaults, with the ``--config`` YAML's
    section of that step over them (``predict: {max_people: 2}``, ``triangulate: {people:
    auto}``).

    Raises:
        InputError: an unreadable config, an unknown section or option (each named).
    """
    given: dict = {}
    if config is not None:
        import yaml

        from ..io.files import read_text

        path = Path(config)
        try:
            given = yaml.safe_load(read_text(path)) or {}
        except yaml.YAMLError as e:
            raise InputError(f"--config {path}: not YAML ({str(e).splitlines()[0]})") from None
        if not isinstance(given, dict):
            raise InputError(f"--config {path}: expected a mapping of step -> options")
        for name, section in given.items():  # a handful of steps
            if name not in STEPS:
                raise InputError(f"--config {path}: unknown step {name!r} (steps: "
                                 f"{', '.join(STEPS)})")  # fmt: skip
            if not isinstance(section, dict):
                raise InputError(f"--config {path}: {name}: expected a mapping of options")
    out = {}
    for s in steps:  # a handful of steps
        options = COMMANDS[s].options()
        section = given.get(s) or {}
        unknown = sorted(set(section) - set(options))
        if unknown:
            raise InputError(f"--config {config}: {s}: unknown option(s) {', '.join(unknown)} "
                             f"(options: {', '.join(sorted(options))})")  # fmt: skip
        out[s] = {**options, **section}
    return out


# ---------------------------------------------------------------------- digests
def _file_hash(path: Path, known: dict) -> dict:
    """``{"size", "mtime_ns", "sha256"}`` of a file; the sha256 of ``known`` is reused when the
    size and modification time are those recorded (files are read once, not on every run)."""
    st = path.stat()
    if known.get("size") == st.st_size and known.get("mtime_ns") == st.st_mtime_ns:
        return known
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):  # 1 MiB at a time
            h.update(block)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": h.hexdigest()}


def _tree(paths: Sequence[Path], base: Path, known: dict) -> dict:
    """Every file under ``paths`` (files or folders; staging and hidden files left out), keyed
    by its path relative to ``base`` (absolute when outside)."""
    out = {}
    for top in paths:  # a handful of inputs or outputs
        files = [top] if top.is_file() else sorted(
            p for p in top.rglob("*") if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(top).parts))  # fmt: skip
        for p in files:  # every file once
            try:
                key = p.relative_to(base).as_posix()
            except ValueError:
                key = str(p.resolve())
            out[key] = _file_hash(p, known.get(key, {}))
    return out


def _digest_path(rec: Recording, step: str) -> Path:
    return rec.folder / f"{COMMANDS[step].output}.digest.json"


def _read_digest(rec: Recording, step: str) -> dict | None:
    path = _digest_path(rec, step)
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _plain(options: dict) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in sorted(options.items())}


def _inputs(rec: Recording, step: str, options: dict, known: dict) -> dict:
    s = COMMANDS[step]
    paths = [rec.folder / i if i != "videos" else rec.videos for i in s.inputs]
    if s.calibration:
        paths.append(rec.calibration)
    if step == "triangulate" and options.get("_synced"):
        paths.append(rec.folder / "sync" / "sync.json")
    for extra in ("checkpoint", "detector", "boxes"):  # predict's other input files
        if options.get(extra):
            paths.append(Path(options[extra]))
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise MissingFileError(f"{missing[0]}: no such file or folder"
                               + (f" (run --steps {_maker(missing[0])} first)"
                                  if _maker(missing[0]) else ""))  # fmt: skip
    return _tree(paths, rec.folder, known)


def _maker(path: Path) -> str | None:
    parts = path.as_posix()
    for name, s in COMMANDS.items():  # four steps
        if f"/{s.output}/" in parts or parts.endswith(f"/{s.output}"):
            return name
    return None


def _expected(rec: Recording, step: str, options: dict) -> dict:
    """What the digest of ``step`` says when it is up to date (``inputs``, ``options``)."""
    old = _read_digest(rec, step) or {}
    return {"step": step, "options": _plain(options),
            "inputs": _inputs(rec, step, options, old.get("inputs", {}))}  # fmt: skip


def up_to_date(rec: Recording, step: str, options: dict) -> bool:
    """Whether ``step``'s outputs in ``rec`` exist for the same inputs and options (its digest
    matches what the inputs are now, and the outputs are those it recorded)."""
    old = _read_digest(rec, step)
    if not old or old.get("state") != "done":
        return False
    try:
        now = _expected(rec, step, options)
    except (OSError, InputError):
        return False
    if now["inputs"] != old.get("inputs") or now["options"] != old.get("options"):
        return False
    out = rec.folder / COMMANDS[step].output
    try:
        return out.is_dir() and _tree([out], rec.folder, old.get("outputs", {})) == old["outputs"]
    except OSError:
        return False


def _write_digest(rec: Recording, step: str, record: dict) -> None:
    from ..train.atomic_save import write_text_atomic

    write_text_atomic(_digest_path(rec, step), json.dumps(record, indent=1, sort_keys=True))


def _options_for(step: str, options: dict[str, dict], steps: Sequence[str]) -> dict:
    opts = dict(options[step])
    if step == "triangulate" and "sync" in steps:
        opts["_synced"] = True
    return opts


def run_steps(rec: Recording, steps: Sequence[str], options: dict[str, dict], overwrite: bool,
              models=None, decoded=None) -> dict:  # fmt: skip
    """Run ``steps`` on one recording (those up to date are skipped): before each a digest
    marked ``running``, after its commit one marked ``done`` with its inputs, options and
    outputs. An output folder that exists without a digest (not the batch's) is replaced only
    with ``overwrite``. Returns ``{"frames", "seconds", "ran"}``."""
    counts = {"frames": 0, "seconds": 0.0, "ran": []}
    for step in steps:  # a handful of steps
        opts = _options_for(step, options, steps)
        if up_to_date(rec, step, opts):
            continue
        expected = _expected(rec, step, opts)
        ours = _digest_path(rec, step).exists()  # the batch wrote these outputs
        _write_digest(rec, step, {**expected, "state": "running"})
        kwargs = {k: v for k, v in opts.items() if not k.startswith("_")}
        t0 = time.perf_counter()
        s = COMMANDS[step]
        if step == "predict":
            got = s.run(rec, kwargs, overwrite or ours, models, decoded)
        elif step == "triangulate":
            got = s.run(rec, kwargs, overwrite or ours, bool(opts.get("_synced")))
        else:
            got = s.run(rec, kwargs, overwrite or ours)
        counts["frames"] += got.get("frames", 0)
        counts["seconds"] += time.perf_counter() - t0
        counts["ran"].append(step)
        outputs = _tree([rec.folder / s.output], rec.folder, {})
        _write_digest(rec, step, {**expected, "state": "done", "outputs": outputs})
    return counts


def _reason(e: BaseException) -> str:
    """A failure as one line: an input error's message, else ``internal error: Type: msg``."""
    text = "; ".join(part.strip() for part in str(e).splitlines() if part.strip()) or repr(e)
    if isinstance(e, InputError) or (isinstance(e, OSError) and not isinstance(e, InputError)):
        return text
    return f"internal error: {type(e).__name__}: {text}"


# ---------------------------------------------------------------------- progress
class Progress:
    """The batch's progress on stderr: recordings finished of the total, frames/s, time left."""

    def __init__(self, total: int, show: bool) -> None:
        self.total, self.show, self.t0 = total, show, time.perf_counter()
        self.finished = self.frames = 0

    def update(self, name: str, what: str, frames: int = 0) -> None:
        self.finished += 1
        self.frames += frames
        if not self.show:
            return
        dt = time.perf_counter() - self.t0
        left = (self.total - self.finished) * dt / max(self.finished, 1)
        print(f"batch: {self.finished}/{self.total} recordings ({name}: {what}); "
              f"{self.frames / max(dt, 1e-9):.1f} frames/s; about {left:.0f} s left",
              file=sys.stderr, flush=True)  # fmt: skip


# ---------------------------------------------------------------------- one process
def _run_sequential(todo: list[Recording], steps, options, overwrite, report, progress) -> None:
    models = None
    for rec in todo:  # one recording at a time
        try:
            if "predict" in steps and models is None and not up_to_date(
                    rec, "predict", options["predict"]):  # fmt: skip
                from .predict import load_models

                p = options["predict"]
                models = load_models(p["checkpoint"], model=p["model"], detector=p["detector"],
                                     device=p["device"], max_people=p["max_people"])  # fmt: skip
            got = run_steps(rec, steps, options, overwrite, models)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # one failing recording never stops the others
            report["failed"].append({"recording": rec.name, "reason": _reason(e)})
            progress.update(rec.name, "failed")
            continue
        report["done"].append({"recording": rec.name, "frames": got["frames"],
                               "seconds": round(got["seconds"], 3)})  # fmt: skip
        progress.update(rec.name, "done", got["frames"])


# ---------------------------------------------------------------------- Ray
def ray_available() -> bool:
    """Whether Ray is installed (``pip install tensorpose[ray]``)."""
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def _decode_chunks(videos: list[str], chunk: int) -> Iterator[list]:
    """The lockstep steps of a recording's videos, ``chunk`` time steps per item."""
    from ..io.video import iter_videos_lockstep

    buf: list = []
    for step in iter_videos_lockstep(videos):  # a loop over time (decoding)
        buf.append(step)
        if len(buf) == chunk:
            yield buf
            buf = []
    if buf:
        yield buf


def _ray_parts(threads: int):
    """The remote functions and the model actor class (defined once Ray is imported)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ..io.video import is_video

    @ray.remote(num_cpus=0)
    def decode(videos: list[str], chunk: int):
        from ..threads import set_threads

        set_threads(threads)
        yield from _decode_chunks(videos, chunk)

    @ray.remote(max_retries=RETRIES)
    def cpu_steps(rec: Recording, steps: tuple, options: dict, overwrite: bool) -> dict:
        from ..threads import set_threads

        set_threads(threads)
        return run_steps(rec, steps, options, overwrite)

    class PoseWorker:
        """A model worker: the 2D model loaded once; per recording, frames streamed from a
        decoding task."""

        def __init__(self, options: dict, fault: str | None) -> None:
            from ..threads import set_threads
            from .predict import load_models

            set_threads(threads)
            # frames from Ray's object store are read-only; the model copies them (pad_frames)
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            self.fault = fault
            self.models = load_models(options["checkpoint"], model=options["model"],
                                      detector=options["detector"], device=options["device"],
                                      max_people=options["max_people"])  # fmt: skip

        def run(self, rec: Recording, options: dict, overwrite: bool) -> dict:
            p = options["predict"]
            decoded = None
            if p["model"] == "blazepose" and p.get("tracking", True):
                videos = [str(v) for v in sorted(rec.videos.iterdir()) if is_video(v)]
                here = NodeAffinitySchedulingStrategy(
                    ray.get_runtime_context().get_node_id(), soft=True
                )  # decode beside the model
                gen = decode.options(_generator_backpressure_num_objects=DECODE_AHEAD,
                                     scheduling_strategy=here)  # fmt: skip
                decoded = self._stream(gen.remote(videos, CHUNK_STEPS))
            got = run_steps(rec, ("predict",), options, overwrite, self.models, decoded)
            return {**got, "node": ray.get_runtime_context().get_node_id()}

        def _stream(self, gen) -> Iterator[list]:
            for i, ref in enumerate(gen):  # chunks of time steps, as they are decoded
                if self.fault and i == 1 and not os.path.exists(self.fault):
                    Path(self.fault).write_text(str(os.getpid()))
                    os._exit(1)  # a worker killed halfway (the tests' fault injection)
                yield from ray.get(ref)

    return ray, decode, cpu_steps, PoseWorker


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """``--address HOST:PORT`` (or ``ray://HOST:PORT``) answers a TCP connection within
    ``timeout`` seconds; Ray itself would keep retrying for minutes. ``auto`` is Ray's."""
    import socket

    if address == "auto":
        return
    host, _, port = address.split("://")[-1].rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--address must be HOST:PORT (as `ray start --head` prints), got "
                         f"{address!r}")  # fmt: skip
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise InputError(f"--address {address}: no Ray cluster answers there "
                         f"({e.strerror or e})") from None  # fmt: skip


def _init_ray(address: str | None, cpus: int | None, quiet: bool) -> str:
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address is None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=not quiet,
                 logging_level="ERROR", configure_logging=True)  # fmt: skip
        return "local"
    _check_reachable(address)
    try:
        ray.init(address=address, log_to_driver=not quiet, logging_level="ERROR")
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise InputError(f"--address {address}: no Ray cluster there ({_reason(e)})") from None
    return address


def _system_failure(e: BaseException) -> bool:
    """A dead worker, node or object (retried), not an error of the recording itself."""
    import ray.exceptions as rx

    kinds = (rx.RayActorError, rx.WorkerCrashedError, rx.ObjectLostError,
             getattr(rx, "NodeDiedError", rx.ObjectLostError))  # fmt: skip
    return isinstance(e, kinds)


def _cause(e: BaseException) -> BaseException:
    import ray.exceptions as rx

    if isinstance(e, rx.RayTaskError):
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException):
            return cause
    return e


def _run_ray(todo: list[Recording], steps, options, overwrite, report, progress, *,
             workers: int, threads: int, fault: str | None) -> None:  # fmt: skip
    ray, _, cpu_steps, PoseWorker = _ray_parts(threads)
    predict = "predict" in steps
    cpu = tuple(s for s in steps if s != "predict")
    # the cluster's GPUs (this machine's, or the nodes' with --address), unless --device cpu
    gpus = ray.cluster_resources().get("GPU", 0) >= 1 and options.get("predict", {}).get(
        "device") != "cpu"  # fmt: skip
    actor = ray.remote(num_cpus=1, num_gpus=1 if gpus else 0, max_restarts=RETRIES,
                       max_task_retries=0)(PoseWorker)  # fmt: skip
    pool = ([actor.remote(options["predict"], fault) for _ in range(min(workers, len(todo)))]
            if predict else [])  # fmt: skip
    free = list(pool)
    waiting = list(todo)  # recordings whose prediction is not yet submitted
    running: dict = {}  # ref -> (recording, stage, actor, attempt)
    tries: dict[str, int] = {}  # recording -> its prediction's attempts after a dead worker
    predicted: dict[str, dict] = {}  # recording -> its prediction's frames, seconds, node

    def submit_cpu(rec: Recording, attempt: int = 0) -> None:
        ref = cpu_steps.remote(rec, cpu, options, overwrite)
        running[ref] = (rec, "cpu", None, attempt)

    if not predict:
        for rec in waiting:  # every recording at once: Ray queues the tasks
            submit_cpu(rec)
        waiting = []
    try:
        while waiting or running:
            while waiting and free:  # a free model worker: the next recording
                rec, a = waiting.pop(0), free.pop()
                ref = a.run.remote(rec, options, overwrite)
                running[ref] = (rec, "predict", a, tries.get(rec.name, 0))
            if not waiting and free:  # no more predictions: release the idle workers' CPUs
                for a in free:
                    ray.kill(a)
                free = []
            ready, _ = ray.wait(list(running), num_returns=1)
            ref = ready[0]
            rec, stage, a, attempt = running.pop(ref)
            try:
                got = ray.get(ref)
            except Exception as e:  # one failing recording never stops the others
                if a is not None:
                    free.append(a)
                if _system_failure(e) and attempt < RETRIES:
                    if stage == "predict":  # the actor restarts (max_restarts); run it again
                        tries[rec.name] = attempt + 1
                        waiting.insert(0, rec)
                    else:
                        submit_cpu(rec, attempt + 1)
                    continue
                cause = _cause(e)
                report["failed"].append({"recording": rec.name, "reason": _reason(cause)})
                progress.update(rec.name, "failed")
                continue
            if stage == "predict":
                free.append(a)
                predicted[rec.name] = got
                if cpu:
                    submit_cpu(rec)
                    continue
            first = predicted.pop(rec.name, {"frames": 0, "seconds": 0.0})
            n = first["frames"]
            entry = {
                "recording": rec.name,
                "frames": n,
                "seconds": round(first["seconds"] + (got["seconds"] if stage == "cpu" else 0), 3),
            }
            if "node" in first:
                entry["node"] = first["node"]
            report["done"].append(entry)
            progress.update(rec.name, "done", n)
    except BaseException:  # Ctrl-C, SIGTERM: stop what runs (outputs are whole or absent)
        for ref, (_, stage, _, _) in running.items():  # the model workers are killed below
            if stage == "cpu":
                ray.cancel(ref, force=True)
        raise
    finally:
        for a in pool:
            ray.kill(a)


# ---------------------------------------------------------------------- the command
def run_batch(
    root: str | os.PathLike,
    *,
    steps: str | Sequence[str] | None = None,
    config: str | os.PathLike | None = None,
    address: str | None = None,
    workers: int | None = None,
    cpus: int | None = None,
    local: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    threads: int | None = None,
    fault: str | os.PathLike | None = None,
) -> dict:
    """Run every recording of a batch through ``steps`` (``tensorpose batch``).

    Args:
        root: a folder in Pose2Sim's batch layout or a manifest CSV
            (:func:`tensorpose.io.recordings.find_recordings`).
        steps: comma-separated subset of :data:`STEPS` (default :data:`DEFAULT_STEPS`).
        config: YAML with one section of options per step (:func:`step_options`).
        address: an existing Ray cluster (``ray start --head`` prints it); ``None``: local
            (or the Ray this process has already started with ``ray.init``, left running).
        workers: model workers (default: the GPUs, else half the CPUs Ray has, at least 1).
        cpus: CPUs of the local Ray instance (default: this machine's).
        local: run sequentially in this process, without Ray.
        overwrite: replace outputs the batch did not write (no digest beside them).
        progress: print the progress on stderr.
        threads: torch threads per Ray worker (default 1), or in this process without Ray
            (default: :func:`tensorpose.threads.default_threads`).
        fault: tests only: a marker file; the first model worker to have taken one chunk of
            a recording kills its own process (once), as a killed worker would.

    Returns a report: ``root``, ``mode``, ``steps``, ``options``, ``done``, ``skipped``,
    ``failed`` (each recording with its one-line reason), ``seconds``, ``frames``; the same
    is written to ``ROOT/batch.json``.

    Raises:
        InputError: a bad root, layout, manifest, ``--steps``, ``--config`` or flag.
    """
    t0 = time.perf_counter()
    steps = parse_steps(steps)
    options = step_options(steps, config)
    for flag, v in (("--workers", workers), ("--cpus", cpus)):
        if v is not None and (not isinstance(v, int) or v < 1):
            raise InputError(f"{flag} must be a positive integer, got {v!r}")
    if local and address is not None:
        raise InputError("--local runs without Ray: it takes no --address")
    root, recordings = find_recordings(root)
    mode = "sequential" if local or not ray_available() else "ray"
    why = "--local" if local else "Ray is not installed (pip install tensorpose[ray])"
    if mode == "sequential" and address is not None:
        raise InputError(f"--address {address}: Ray is not installed (pip install "
                         "tensorpose[ray])")  # fmt: skip
    report: dict = {"root": str(root), "mode": mode, "steps": list(steps),
                    "options": {s: _plain(o) for s, o in options.items()},
                    "done": [], "skipped": [], "failed": [], "interrupted": False}  # fmt: skip
    todo = []
    for rec in recordings:  # one check per recording
        if all(up_to_date(rec, s, _options_for(s, options, steps)) for s in steps):
            report["skipped"].append({"recording": rec.name, "reason": "up to date (digest)"})
        else:
            todo.append(rec)
    bar = Progress(len(todo), progress)
    if progress:
        print(f"batch: {len(recordings)} recordings under {root}, {len(todo)} to run, "
              f"{len(report['skipped'])} up to date; steps {','.join(steps)}; "
              + ("on Ray" if mode == "ray" else f"sequentially in one process ({why})"),
              file=sys.stderr, flush=True)  # fmt: skip
    try:
        if mode == "sequential" or not todo:
            from ..threads import set_threads

            set_threads(threads)
            _run_sequential(todo, steps, options, overwrite, report, bar)
        else:
            import ray

            ours = not ray.is_initialized()  # a caller's Ray (a notebook, the tests) is kept
            report["address"] = _init_ray(address, cpus, not progress) if ours else "caller's"
            try:
                res = ray.cluster_resources()
                n = workers or max(1, int(res.get("GPU", 0)) or int(res.get("CPU", 2)) // 2)
                report["workers"] = n
                report["nodes"] = sum(1 for node in ray.nodes() if node.get("Alive"))
                _run_ray(todo, steps, options, overwrite, report, bar, workers=n,
                         threads=threads or 1,
                         fault=None if fault is None else str(fault))  # fmt: skip
            finally:
                if ours:
                    ray.shutdown()
    except BaseException as e:
        report["interrupted"] = not isinstance(e, Exception)  # Ctrl-C, SIGTERM
        raise
    finally:
        report["seconds"] = round(time.perf_counter() - t0, 3)
        report["frames"] = sum(d["frames"] for d in report["done"])
        from ..train.atomic_save import write_text_atomic

        write_text_atomic(root / "batch.json", json.dumps(report, indent=1))
    return report


def summary(r: dict) -> list[str]:
    """The lines ``tensorpose batch`` prints."""
    how = "sequentially in one process" if r["mode"] == "sequential" else (
        f"on Ray ({r['address']}, {r['workers']} model workers, {r['nodes']} nodes)"
        if "workers" in r else "nothing to run")  # fmt: skip
    lines = [f"{r['root']}: {len(r['done'])} done, {len(r['skipped'])} skipped (up to date), "
             f"{len(r['failed'])} failed; steps {','.join(r['steps'])} {how}; {r['frames']} "
             f"frames in {r['seconds']:.1f} s"]  # fmt: skip
    lines += [f"  failed {f['recording']}: {f['reason']}" for f in r["failed"]]
    return [*lines, f"  wrote {Path(r['root']) / 'batch.json'}"]
