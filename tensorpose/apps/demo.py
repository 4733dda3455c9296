"""``tensorpose demo``: train the default lifter on the bundled CMU mocap, evaluate it on the
held-out recording, and draw its curves and skeletons."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import load_config
from ..inference import evaluate
from ..tasks import get_task
from ..train.atomic_save import write_text_atomic
from ..train.folder import check_run_name, fresh_name
from ..train.trainer import train
from ..viz.charts import skeletons_3d_picture
from ..viz.draw import bone_colours_bgr, plot_curves

__all__ = ["DEMO_THREADS", "demo"]

DEMO_THREADS = 2
"""CPU threads of ``tensorpose demo`` (fixed, so its numbers do not depend on the machine)."""


def demo(
    overrides: list[str] | tuple = (),
    head: str = "kinematic",
    out: str | Path = "runs",
    name: str = "",
    progress: bool = True,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train the default lifter (``configs/lift_cmu.yaml``) with ``head``, evaluate it on the
    held-out sequence, and write ``metrics.json``, ``curves.png`` and ``skeletons.png`` into
    ``out/name`` (default name ``demo_<head>``; when that folder exists, the first free
    ``demo_<head>_2``, ``_3``..., said in the first line: an earlier demo is never touched).

    The demo pins ``train.threads`` to :data:`DEMO_THREADS` (an override may change it): CPU
    results depend on the thread count (reductions are split per thread), so the pinned count
    gives the same numbers on every machine and under any load.

    Returns:
        ``config``, ``run_dir``, ``metrics`` (the evaluation), ``seconds``.
    """
    t0 = time.perf_counter()
    cfg = load_config(None, [f"model.head={head}", f"train.threads={DEMO_THREADS}", *overrides])
    if name:
        run_dir = Path(out) / check_run_name(name, "--name")
    else:
        default = f"demo_{cfg.model.head}"
        run_dir = Path(out) / fresh_name(Path(out), default)
        if run_dir.name != default:
            say(f"{Path(out) / default} exists (an earlier demo): writing {run_dir} instead")
    say(
        f"tensorpose demo: training the {cfg.model.head} lifter on CMU {', '.join(cfg.data.train)}"
        f" ({cfg.data.train_cameras} virtual cameras, {cfg.train.epochs} epochs, "
        f"{cfg.train.threads} CPU threads), held out: {', '.join(cfg.data.val)} -> {run_dir}"
    )
    result = train(cfg, run_dir, progress=progress)
    m = evaluate(result["checkpoint"], device=cfg.train.device, return_predictions=True)
    metrics = get_task(cfg.task).metrics_json(m)
    title = f"{cfg.model.head} head, held out {', '.join(m['sequences'])}"
    plot_curves(result["history"], run_dir / "curves.png", title)
    clip = m["predictions"][0]
    T = clip["pred"].shape[0]
    frames = [int(T * q) for q in (0.2, 0.4, 0.6, 0.8)]
    err = (clip["pred"] - clip["target"]).norm(dim=-1).mean(-1)
    labels = [f"frame {f}: {1000 * float(err[f]):.0f} mm" for f in frames]
    skeleton = m["data"].skeleton
    skeletons_3d_picture(run_dir / "skeletons.png", clip["pred"][frames].double().numpy(),
                         skeleton.bones, bone_colours_bgr(skeleton), labels,
                         f"{title}, camera {m['data'].clips[clip['clip']].camera} (ground truth "
                         "grey)", reference=clip["target"][frames].double().numpy())  # fmt: skip
    metrics["seconds"] = round(time.perf_counter() - t0, 1)
    write_text_atomic(run_dir / "metrics.json", json.dumps(metrics, indent=1))
    return {"config": cfg, "run_dir": run_dir, "metrics": m, "seconds": metrics["seconds"]}
