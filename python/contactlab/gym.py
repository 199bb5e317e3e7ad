"""Gymnasium environments on ContactLab's learning tasks (needs ``pip install gymnasium``).

``QuadrupedEnv(scene)`` wraps the task of a scene's ``learn`` section, the one BPTT and PPO
train on (``scenes/learn_stand.ron``: hold commanded base poses under pushes;
``scenes/learn_walk.ron``: walk at commanded speeds): the same observation, action and reward.
Observations and actions are float64; an action is a vector of joint-target offsets, clamped to
``[-3, 3]`` and scaled by the task's ``action_scale``; the reward is minus the task's cost, and a
step the simulator cannot take ends the episode charged the task's failure cost.
"""

import gymnasium as gym
import numpy as np

from ._contactlab import TaskEnv


class QuadrupedEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, scene=None, task="stand"):
        """``scene``: a scene file with a ``learn`` section; default: the shipped task
        ``task`` (``"stand"`` or ``"walk"``, compiled into the package)."""
        self._env = TaskEnv(scene) if scene is not None else TaskEnv.builtin(task)
        limit = self._env.action_limit
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self._env.obs_dim,), np.float64)
        self.action_space = gym.spaces.Box(-limit, limit, (self._env.act_dim,), np.float64)
        self.dt = self._env.dt
        self.max_episode_steps = self._env.steps

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        episode_seed = int(self.np_random.integers(0, 2**63 - 1))
        return self._env.reset(episode_seed), {}

    def step(self, action):
        obs, reward, terminated, truncated = self._env.step(np.asarray(action, dtype=np.float64))
        return obs, float(reward), bool(terminated), bool(truncated), {}
