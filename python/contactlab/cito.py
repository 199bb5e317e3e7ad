"""Contact-implicit trajectory optimization: DDP over the hard-contact simulator toward a
base-pose target, with no contact schedule (the `cito` section of a scene; ``contactlab cito``).

``solve(sim, settings, callback)`` starts from the simulation's present state (settle it first,
e.g. ``Scene.settled(0.5)``); ``settings`` is a dict of the section's fields (any subset; unknown
fields raise ValueError), for example ``Scene.cito_settings()`` edited; ``callback(iteration,
cost)`` runs after every accepted DDP iteration, and a callback that raises (or Ctrl-C) cancels
the solve and re-raises. Returns ``(summary, xs, us)``: the dict of ``contactlab cito``'s
``summary.json`` (status, cost, pose errors, footfalls, fallback Jacobians, ...), the replayed
plan's states (T + 1 x (nq + nv)) and its joint torques (T x nu).
"""

from ._contactlab import cito_solve as _solve

__all__ = ["solve"]


def solve(sim, settings=None, callback=None):
    """Solve the CITO problem from ``sim``'s state; see the module docs."""
    return _solve(sim, settings, callback)
