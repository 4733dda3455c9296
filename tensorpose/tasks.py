"""Tasks: the one place where a batch meets the model and the loss.

``LiftingTask(batch) -> {"loss", "pred", ...}`` for training steps, and
:meth:`LiftingTask.evaluate` for dense evaluation of whole clips with the metrics.
"""

from __future__ import annotations

import torch
from torch import nn

from . import losses, metrics
from .data.mocap import LiftingSet
from .models.lifter import TemporalLifter
from .ops.kinematics import decompose

__all__ = ["LiftingTask"]


class LiftingTask(nn.Module):
    """2D keypoint windows -> root-relative 3D joints, with the loss of the model's head.

    Loss: MPJPE, plus for the kinematic head ``bone_weight * |length error|`` and
    ``direction_weight * |direction error|`` (all in metres / unit vectors).
    """

    def __init__(
        self, model: TemporalLifter, bone_weight: float = 1.0, direction_weight: float = 0.1
    ) -> None:
        super().__init__()
        self.model = model
        self.skeleton = model.skeleton
        self.bone_weight = bone_weight
        self.direction_weight = direction_weight

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch``: ``keypoints (B, R, J, 2)`` windows of exactly the receptive field and
        ``target (B, 1, J, 3)``. Runs the strided (one frame per window) model.

        Returns ``loss`` (0-dim), ``pred (B, 1, J, 3)``, ``mpjpe`` (0-dim, detached) and the
        loss terms, all on the device (nothing is read back to the host).
        """
        out = self.model(batch["keypoints"], strided=True)
        return self._loss(out, batch["target"])

    def _loss(self, out: dict[str, torch.Tensor], target: torch.Tensor) -> dict[str, torch.Tensor]:
        pred = out["joints"]
        err = losses.mpjpe_loss(pred, target)
        result = {"pred": pred, "mpjpe": err.detach()}
        loss = err
        if "lengths" in out:
            bone = losses.bone_length_loss(out["lengths"], target, self.skeleton)
            direction = losses.bone_direction_loss(out["directions"], target, self.skeleton)
            loss = loss + self.bone_weight * bone + self.direction_weight * direction
            result["bone_loss"] = bone.detach()
            result["direction_loss"] = direction.detach()
        result["loss"] = loss
        return result

    @torch.no_grad()
    def predict_clips(self, data: LiftingSet) -> list[dict[str, torch.Tensor]]:
        """Dense predictions for every clip: one batched forward per group of clips of equal
        length (the cameras of one sequence). Each entry: ``pred``, ``target (T, J, 3)``,
        ``valid (T,)``, ``keypoints (T, J, 2)`` and the clip index."""
        was_training = self.training
        self.eval()
        results = []
        for group in data.clip_groups():  # a loop over sequences, not samples
            arrays = [data.clip_arrays(i) for i in group]
            kp = torch.stack([a["keypoints"] for a in arrays])
            pred = self.model.predict(kp)
            for k, (i, a) in enumerate(zip(group, arrays, strict=True)):
                results.append({"clip": i, "pred": pred[k], **a})
        self.train(was_training)
        return results

    @torch.no_grad()
    def evaluate(self, data: LiftingSet, mean_pose: torch.Tensor | None = None) -> dict[str, float]:
        """Metrics over all valid frames of all clips of ``data``, in millimetres.

        Returns ``mpjpe_mm``, ``p_mpjpe_mm``, ``n_mpjpe_mm``, ``mpjve_mm`` (per frame at the
        data's frame rate), ``bone_std_mm`` (per-bone std of predicted lengths over each clip,
        averaged), ``frames`` (evaluated poses, frames x cameras), ``loss`` (the training loss
        on the dense predictions) and, given ``mean_pose (J, 3)``, ``mean_pose_mpjpe_mm`` (the
        error of always predicting that pose).
        """
        sums = {k: 0.0 for k in ("mpjpe", "p_mpjpe", "n_mpjpe", "loss", "mean_pose")}
        vel_sum, vel_n, std_sum, frames = 0.0, 0, 0.0, 0
        for r in self.predict_clips(data):
            pred, target, valid = r["pred"], r["target"], r["valid"]
            n = int(valid.sum())
            p, t = pred[valid], target[valid]
            sums["mpjpe"] += float(metrics.mpjpe(p, t, "none").sum())
            sums["p_mpjpe"] += float(metrics.p_mpjpe(p, t, "none").sum())
            sums["n_mpjpe"] += float(metrics.n_mpjpe(p, t, "none").sum())
            if mean_pose is not None:
                mp = mean_pose.to(t).expand_as(t)
                sums["mean_pose"] += float(metrics.mpjpe(mp, t, "none").sum())
            both = valid[1:] & valid[:-1]
            if pred.shape[0] > 1 and bool(both.any()):
                v = metrics.mpjve(pred, target, "none")[both]
                vel_sum += float(v.sum())
                vel_n += int(v.numel())
            std_sum += float(metrics.bone_length_std(pred[valid], self.skeleton, "mean"))
            loss_out = {"joints": p[None]}
            if self.model.head == "kinematic":
                lengths, dirs = decompose(p[None], self.skeleton)
                loss_out.update(lengths=lengths[:, :1], directions=dirs)
            sums["loss"] += float(self._loss(loss_out, t[None])["loss"]) * n
            frames += n
        clips = len(data.clips)
        out = {
            "mpjpe_mm": 1000 * sums["mpjpe"] / frames,
            "p_mpjpe_mm": 1000 * sums["p_mpjpe"] / frames,
            "n_mpjpe_mm": 1000 * sums["n_mpjpe"] / frames,
            "mpjve_mm": 1000 * vel_sum / max(vel_n, 1),
            "bone_std_mm": 1000 * std_sum / clips,
            "frames": frames,
            "loss": sums["loss"] / frames,
        }
        if mean_pose is not None:
            out["mean_pose_mpjpe_mm"] = 1000 * sums["mean_pose"] / frames
        return out
