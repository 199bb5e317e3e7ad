"""ContactLab from Python: hard-contact simulation of legged robots, the transition Jacobians
of a step under each contact sensitivity (exact, Signorini-relaxed, relaxed), rollout gradients,
batch rollouts on all cores, contact-implicit trajectory optimization (``contactlab.cito``) and
MPC (``Mpc``), and ContactNets (``contactlab.contactnets``).

States are ``x = (q, v)`` (float64), with a free-flyer's quaternion ``(x, y, z, w)`` in ``q``;
Jacobians are in the tangent space ``dx = (dq, dv)`` of size ``2 nv``.
"""

from ._contactlab import (
    Model,
    Mpc,
    Scene,
    Simulation,
    TaskEnv,
    builtin_urdf,
    fd_transition,
    rollout,
    rollout_cost,
    rollout_gradient,
    rollout_jacobians,
    transition_jacobians,
)
from . import cito, contactnets

__all__ = [
    "Model",
    "Mpc",
    "Scene",
    "Simulation",
    "TaskEnv",
    "builtin_urdf",
    "cito",
    "contactnets",
    "fd_transition",
    "rollout",
    "rollout_cost",
    "rollout_gradient",
    "rollout_jacobians",
    "transition_jacobians",
]
