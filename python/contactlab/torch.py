"""One hard-contact step as a PyTorch function whose backward pass is the chosen contact
sensitivity's transition Jacobians (needs ``pip install torch``; CPU, float64).

    import torch, contactlab as cl
    from contactlab.torch import step

    sim = cl.Simulation(model)                       # dynamics, time step, terrain
    x = torch.tensor(np.r_[q, v], requires_grad=True)
    u = torch.zeros(model.nu, dtype=torch.float64, requires_grad=True)
    x1 = step(sim, x, u, sensitivity="relaxed", kappa=1e-3, delta=1e-2)
    loss(x1).backward()                              # x.grad, u.grad through A^T, B^T

``x = (q, v)`` in coordinates (nq + nv, a free-flyer's quaternion ``(x, y, z, w)`` in ``q``), with
an optional leading batch dimension; ``u`` the joint torques (nu). The step is the raw dynamics
(no controller), from a cold start, exactly as ``transition_jacobians`` takes it; its result is
bit for bit the ``Simulation.step`` of a fresh simulation at ``x``.

The library's Jacobians ``A``, ``B`` are in the tangent space ``dx = (dq, dv)`` (2 nv). The
backward pass maps cotangents between coordinates and tangents at both ends: for the
free-flyer, ``q (+) dq`` moves the position by ``R dp`` (``dp`` in the base frame) and the
quaternion by ``quat (x) exp(dtheta)``, so ``d coords / d tangent`` is ``R`` and ``0.5 L(quat)``
(first three columns of the left-multiplication matrix), and ``d tangent / d coords`` is ``R^T``
and ``2 L(q^)^T / |quat|`` (three rows; ``q^`` the unit quaternion: the step normalizes it, so a
quaternion off the unit sphere, as a gradient step on ``x`` leaves it, is handled). The gradient with respect to the quaternion is therefore
tangent to the unit sphere (the step normalizes it). One-DoF joints map by the identity.
"""

import numpy as np
import torch

from ._contactlab import transition_jacobians

__all__ = ["TransitionFunction", "step"]


def _left(quat):
    """L(quat) with quat (x) p = L p, quaternions as (x, y, z, w)."""
    x, y, z, w = quat
    return np.array(
        [
            [w, -z, y, x],
            [z, w, -x, y],
            [-y, x, w, z],
            [-x, -y, -z, w],
        ]
    )


def _rotation(quat):
    x, y, z, w = quat / np.linalg.norm(quat)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def charts(q, nv):
    """``(d coords / d tangent, d tangent / d coords)`` at ``q``: nq x nv and nv x nq. A model
    with ``nq = nv + 1`` has a free-flyer root (position, quaternion) first, as every ContactLab
    model with a floating base does."""
    nq = q.shape[0]
    if nq == nv:
        eye = np.eye(nv)
        return eye, eye
    if nq != nv + 1:
        raise ValueError(f"q has {nq} values; expected nv = {nv} or nv + 1 (a free-flyer root)")
    to_coords, to_tangent = np.zeros((nq, nv)), np.zeros((nv, nq))
    r = _rotation(q[3:7])
    to_coords[0:3, 0:3], to_tangent[0:3, 0:3] = r, r.T
    norm = np.linalg.norm(q[3:7])
    left = _left(q[3:7] / norm)
    to_coords[3:7, 3:6] = 0.5 * left[:, :3]
    # The step normalizes the quaternion: only the tangent part of a change counts, scaled by
    # 1 / |quat| (the radial part drops out of L^T's first three rows).
    to_tangent[3:6, 3:7] = 2.0 * left.T[:3, :] / norm
    to_coords[7:, 6:] = np.eye(nv - 6)
    to_tangent[6:, 7:] = np.eye(nv - 6)
    return to_coords, to_tangent


class TransitionFunction(torch.autograd.Function):
    """``x+ = F(x, u)``; backward by the sensitivity's ``A^T``, ``B^T`` (module docs)."""

    @staticmethod
    def forward(ctx, x, u, sim, sensitivity, kappa, delta):
        model = sim.model
        nq, nv = model.nq, model.nv
        xs = x.detach().cpu().numpy().astype(np.float64).reshape(-1, nq + nv)
        us = u.detach().cpu().numpy().astype(np.float64).reshape(-1, model.nu)
        if us.shape[0] == 1 and xs.shape[0] > 1:
            us = np.repeat(us, xs.shape[0], axis=0)
        if us.shape[0] != xs.shape[0]:
            raise ValueError(f"u: {us.shape[0]} rows for {xs.shape[0]} states")
        out, saved = np.empty_like(xs), []
        for i in range(xs.shape[0]):
            q, v = xs[i, :nq], xs[i, nq:]
            a, b, info = transition_jacobians(
                sim, u=us[i], sensitivity=sensitivity, kappa=kappa, delta=delta, q=q, v=v
            )
            if info["step_status"] not in ("Ok", "SolverNotConverged"):
                raise RuntimeError(f"the step at batch row {i} failed: {info['step_status']}")
            if info["status"] not in ("Ok", "BackwardNotConverged"):
                raise RuntimeError(f"the sensitivity system at batch row {i} failed: {info['status']}")
            out[i, :nq], out[i, nq:] = info["q_next"], info["v_next"]
            saved.append((a, b, charts(info["q_next"], nv)[0], charts(q, nv)[1]))
        ctx.saved = saved
        ctx.shapes = (x.shape, u.shape, nq, nv)
        return torch.from_numpy(out.reshape(x.shape)).to(x)

    @staticmethod
    def backward(ctx, grad):
        x_shape, u_shape, nq, nv = ctx.shapes
        g = grad.detach().cpu().numpy().astype(np.float64).reshape(-1, nq + nv)
        gx, gu = np.empty_like(g), []
        for i, (a, b, to_coords_next, to_tangent) in enumerate(ctx.saved):
            # Cotangent of the output in the tangent space, back through A and B, then back to
            # the input's coordinates.
            gt = np.concatenate([to_coords_next.T @ g[i, :nq], g[i, nq:]])
            gxt = a.T @ gt
            gx[i, :nq], gx[i, nq:] = to_tangent.T @ gxt[:nv], gxt[nv:]
            gu.append(b.T @ gt)
        gu = np.array(gu)
        if int(np.prod(u_shape)) != gu.size:
            gu = gu.sum(axis=0)  # one u broadcast over the batch
        like = grad
        return (
            torch.from_numpy(gx.reshape(x_shape)).to(like),
            torch.from_numpy(gu.reshape(u_shape)).to(like),
            None,
            None,
            None,
            None,
        )


def step(sim, x, u, sensitivity="relaxed", kappa=1e-4, delta=1e-3):
    """``x+`` of one step of ``sim``'s dynamics from ``x`` under torques ``u`` (module docs);
    differentiable in ``x`` and ``u`` through the named sensitivity."""
    return TransitionFunction.apply(x, u, sim, sensitivity, kappa, delta)
