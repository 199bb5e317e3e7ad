"""PPO from Stable-Baselines3 (``pip install stable-baselines3``, which brings torch) on the
Gymnasium environment's stand task, evaluated on 24 held-out episodes against the zero action
(the scene's joint PD alone) every ``chunk`` environment steps.

    python3 python/examples/train_sb3_ppo.py [out.png] [total_steps]

What it shows here (seed 0, 100 000 steps, about 50 s on one core): the held-out return wanders
between -122.5 and -126.0 around the PD's -123.8 (it ended at -126.0): with SB3's defaults and
this budget, PPO does not improve on the PD it adds offsets to. ContactLab's
own PPO and BPTT (``contactlab train``, ``contactlab compare-learning``) train on the same task,
observation, action and reward.
"""

import sys

import numpy as np

from contactlab.gym import QuadrupedEnv

TEST_SEEDS = range(100, 124)


def evaluate(env, policy):
    returns = []
    for seed in TEST_SEEDS:
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def main(out="train_sb3_ppo.png", total_steps=100_000, chunk=20_000):
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    env, test_env = QuadrupedEnv(task="stand"), QuadrupedEnv(task="stand")
    zero = evaluate(test_env, lambda obs: np.zeros(env.action_space.shape))
    model = PPO(
        "MlpPolicy",
        env,
        seed=0,
        n_steps=1024,
        batch_size=256,
        device="cpu",
        verbose=0,
        policy_kwargs={"log_std_init": -1.0},
    )
    steps, curve = [], []
    while model.num_timesteps < total_steps:
        model.learn(min(chunk, total_steps - model.num_timesteps), reset_num_timesteps=False)
        steps.append(model.num_timesteps)
        curve.append(evaluate(test_env, lambda obs: model.predict(obs, deterministic=True)[0]))
    print(f"24 test episodes: zero action (PD alone) {zero:.2f}, PPO after {steps[-1]} steps {curve[-1]:.2f}")
    if out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(steps, curve, "o-", label="PPO (SB3), held out")
        ax.axhline(zero, color="gray", ls="--", label="zero action (PD), held out")
        ax.set_xlabel("environment steps")
        ax.set_ylabel("return")
        ax.set_title("Stable-Baselines3 PPO on the stand task")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out, dpi=120)
    return zero, curve


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "train_sb3_ppo.png", int(sys.argv[2]) if len(sys.argv) > 2 else 100_000)
