"""A policy trained through the Gymnasium environment with a standard library: CMA-ES (pycma,
``pip install cma``; Hansen's covariance matrix adaptation) on a linear policy
``a = clip(W obs + b)`` (420 parameters) for the stand task (hold commanded base poses under
pushes). Each generation's 16 candidates are scored on the same 8 episodes, fresh ones every
generation; the search distribution's mean is reported on 24 held-out episodes against the zero
action (the scene's joint PD alone).

    python3 python/examples/train_cma.py [out.png] [generations]

What it shows (60 generations, about 40 s): the held-out return goes from -123.8 (PD alone) to
about -121.7, a small gain. Scoring every generation on the same 8 episodes instead overfits:
the training return rose from -141 to -109 while the held-out return fell to -149. This is
black-box search on the reward alone, with no gradient and so none of the contact sensitivities:
the baseline a researcher runs before BPTT or PPO (``contactlab train``).
"""

import sys

import numpy as np

from contactlab.gym import QuadrupedEnv

EPISODES = 8
TEST_SEEDS = range(100, 124)


def episode_return(env, theta, seed):
    n_obs, n_act = env.observation_space.shape[0], env.action_space.shape[0]
    w, b = theta[: n_obs * n_act].reshape(n_act, n_obs), theta[n_obs * n_act :]
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        action = np.clip(w @ obs + b, env.action_space.low, env.action_space.high)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += reward
        done = terminated or truncated
    return total


def mean_return(env, theta, seeds):
    return float(np.mean([episode_return(env, theta, s) for s in seeds]))


def main(out="train_cma.png", generations=60):
    import cma

    env = QuadrupedEnv(task="stand")
    n = env.observation_space.shape[0] * env.action_space.shape[0] + env.action_space.shape[0]
    zero = np.zeros(n)
    es = cma.CMAEvolutionStrategy(zero, 0.02, {"popsize": 16, "seed": 1, "verbose": -9})
    curve = []
    for g in range(generations):
        candidates = es.ask()
        seeds = range(1000 + EPISODES * g, 1000 + EPISODES * (g + 1))
        # pycma minimizes: the cost is minus the mean return over this generation's episodes.
        costs = [-mean_return(env, np.asarray(c), seeds) for c in candidates]
        es.tell(candidates, costs)
        curve.append(-float(np.mean(costs)))
    mean = np.asarray(es.result.xfavorite)
    before, after = mean_return(env, zero, TEST_SEEDS), mean_return(env, mean, TEST_SEEDS)
    print(f"24 test episodes: zero action (PD alone) {before:.2f}, CMA-ES linear policy {after:.2f}")
    if out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(np.arange(1, generations + 1), curve, label="candidates' mean return")
        ax.axhline(before, color="gray", ls="--", label="zero action (PD), held out")
        ax.axhline(after, color="C1", ls=":", label="final mean policy, held out")
        ax.set_xlabel("generation (16 candidates x 8 fresh episodes)")
        ax.set_ylabel("return")
        ax.set_title(f"CMA-ES on the stand task: test {before:.1f} -> {after:.1f}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out, dpi=120)
    return before, after


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "train_cma.png", int(sys.argv[2]) if len(sys.argv) > 2 else 60)
