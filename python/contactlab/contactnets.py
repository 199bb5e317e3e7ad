"""ContactNets (Pfrommer, Halm, Posa, CoRL 2020): learn a rigid body's contact geometry (a
polytope's vertices and friction, optionally a deep gap correction, or an end-to-end network)
from observed tosses, by the loss of a small convex problem over the contact impulses.

    data = TossDataset.load("../shared/data/cube_tosses")
    model, report = train(data, tosses=8, settings={"method": "poly", "steps": 500})
    metrics = evaluate(model, data, tosses=[0, 1, 2])
    model.save("poly.json"); ContactModel.load("poly.json")

Everything is in the data's scaled units (lengths in cube half widths). ``train`` draws its
training and validation tosses from the same duplicate-aware split, seeded by
``settings["seed"]``, as ``contactlab contactnets train`` does.
"""

from ._contactlab import ContactModel, TossDataset
from ._contactlab import contactnets_evaluate as _evaluate
from ._contactlab import contactnets_train as _train

__all__ = ["ContactModel", "TossDataset", "evaluate", "train"]


def train(data, tosses, settings=None, callback=None):
    """Train on the first ``tosses`` training tosses; ``settings`` a dict of TrainSettings fields
    (method "poly" | "deep" | "e2e", seed, steps, batch, lr, patience, threads, ...);
    ``callback(steps_done)`` about every 50 ms. Returns ``(ContactModel, report dict)``."""
    return _train(data, tosses, settings, callback)


def evaluate(model, data, tosses=None, threads=2):
    """Full-toss rollouts of ``model`` on ``data`` (all tosses, or the listed indices): a dict of
    mean position error (% of the width), angle error (degrees), penetration (% of the width),
    failed rollouts and per-toss metrics."""
    return _evaluate(model, data, tosses, threads)
