"""ContactLab from Python: hard-contact simulation of legged robots, the transition Jacobians
of a step under each contact sensitivity (exact, Signorini-relaxed, relaxed), and batch rollouts.

States are ``x = (q, v)`` (float64), with a free-flyer's quaternion ``(x, y, z, w)`` in ``q``;
Jacobians are in the tangent space ``dx = (dq, dv)`` of size ``2 nv``.
"""

from ._contactlab import Model, Scene, Simulation, TaskEnv, cito, fd_transition, rollout, rollout_jacobians, transition_jacobians

__all__ = ["Model", "Scene", "Simulation", "TaskEnv", "cito", "fd_transition", "rollout", "rollout_jacobians", "transition_jacobians"]
