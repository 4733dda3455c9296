"""Run-folder logs: ``history.csv``/``history.json`` (one row per epoch), ``steps.csv`` (one row
per log interval), TensorBoard events when the package is installed, and ``summary.json``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

__all__ = ["RunLog"]


class RunLog:
    """Appends rows; only rank 0 of a distributed run creates one."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, append: bool = False) -> None:
        self.dir = Path(run_dir)
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(self.dir / "tensorboard"))
            except ImportError:  # optional extra
                self.tb = None
        if not append:
            for name in ("steps.csv", "history.csv"):
                (self.dir / name).unlink(missing_ok=True)

    def _csv(self, name: str, row: dict) -> None:
        path = self.dir / name
        new = not path.exists()
        with path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(row))
            if new:
                w.writeheader()
            w.writerow(row)

    def step(self, row: dict) -> None:
        self._csv("steps.csv", row)
        if self.tb is not None:
            for k, v in row.items():
                if k != "step" and isinstance(v, (int, float)):
                    self.tb.add_scalar(f"train/{k}", v, row["step"])

    def epoch(self, row: dict, history: list[dict]) -> None:
        self._csv("history.csv", row)
        (self.dir / "history.json").write_text(json.dumps(history, indent=1))
        if self.tb is not None:
            for k, v in row.items():
                if k != "epoch" and isinstance(v, (int, float)):
                    self.tb.add_scalar(f"epoch/{k}", v, row["epoch"])

    def summary(self, summary: dict) -> Path:
        path = self.dir / "summary.json"
        path.write_text(json.dumps(summary, indent=1, default=str))
        self.close()
        return path

    def close(self) -> None:
        """Close the TensorBoard writer (idempotent)."""
        if self.tb is not None:
            self.tb.close()
            self.tb = None
