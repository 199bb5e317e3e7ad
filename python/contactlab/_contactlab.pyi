"""Type stubs of the compiled module (shapes in brackets; float64 arrays)."""

from os import PathLike
from typing import Callable, Optional, Union

import numpy as np
import numpy.typing as npt

Path = Union[str, PathLike]
Array = npt.NDArray[np.float64]

class Model:
    @staticmethod
    def builtin(name: str) -> "Model":
        """"quadruped" or "hopper"."""
    @staticmethod
    def from_urdf(path: Path, floating: bool = True) -> "Model":
        """Raises ValueError naming the file and element on a bad URDF."""
    @property
    def name(self) -> str: ...
    @property
    def nq(self) -> int: ...
    @property
    def nv(self) -> int: ...
    @property
    def nu(self) -> int: ...
    @property
    def contact_names(self) -> list[str]: ...
    def neutral(self) -> Array:
        """[nq]"""

class Scene:
    @staticmethod
    def load(path: Path) -> "Scene":
        """Raises ValueError naming the file, line and field on a bad scene."""
    @property
    def name(self) -> str: ...
    @property
    def model(self) -> Model: ...
    def cito_settings(self) -> dict:
        """The scene's `cito` section: the fields of CitoSettings."""
    def mpc_settings(self) -> dict:
        """The scene's `mpc` section: the fields of MpcSettings."""
    def run_mpc(self, settings: Optional[dict] = None) -> tuple[dict, Array]:
        """Closed-loop MPC under the scene's pulls: summary, trace [steps, 5] (t, x, y, z, error)."""
    def simulation(self) -> "Simulation": ...
    def settled(self, seconds: float) -> "Simulation": ...

class Simulation:
    def __init__(
        self,
        model: Model,
        dt: float = 0.002,
        friction: float = 0.8,
        q: Optional[Array] = None,
        v: Optional[Array] = None,
    ) -> None:
        """Torque-controlled, flat ground; q [nq], v [nv]."""
    @property
    def model(self) -> Model: ...
    @property
    def t(self) -> float:
        """Simulated time (s)."""
    @property
    def dt(self) -> float:
        """Time step (s)."""
    q: Array
    """[nq] configuration (a copy; setting it forgets the warm start)."""
    v: Array
    """[nv] velocity (a copy; setting it forgets the warm start)."""
    control: Array
    """[nu] control offset (N m), the torque when there is no controller."""
    @property
    def u(self) -> Array:
        """[nu] torque applied in the last step."""
    def step(self) -> str:
        """One step; its status ("Ok", "SolverNotConverged", or a failure that left the state)."""
    def step_n(self, n: int) -> int:
        """Up to n steps (GIL released), stopping at the first failure; how many advanced."""
    def add_pull(
        self, body: str, force: Array, start: float, duration: float, point: Optional[Array] = None
    ) -> None:
        """A force [3] (N, world) on `body` at `point` [3] (m, body frame) from simulated time
        `start` for `duration` s."""
    def clear_pulls(self) -> None: ...
    def reset(self) -> None: ...
    def contacts(self) -> dict:
        """gap [k] (m), impulse [k, 3] (N s), mode: list of k strings."""

def transition_jacobians(
    sim: Simulation,
    u: Optional[Array] = None,
    sensitivity: str = "relaxed",
    kappa: float = 1e-4,
    delta: float = 1e-3,
) -> tuple[Array, Array, dict]:
    """A [2nv, 2nv], B [2nv, nu] of one cold step of the raw dynamics at sim's state, and info."""

def rollout(
    model: Model, x0s: Array, us: Array, dt: float = 0.002, friction: float = 0.8
) -> tuple[Array, npt.NDArray[np.uint64]]:
    """x0s [N, nq + nv], us [N, T, nu] -> states [N, T + 1, nq + nv] (NaN after a failure),
    steps advanced [N]; in parallel, GIL released."""

class TaskEnv:
    """A scene's learning task as an environment (the learners' observation, action, reward)."""

    def __init__(self, scene: Path) -> None:
        """Raises ValueError naming the file when the scene has no valid `learn` section."""
    @staticmethod
    def builtin(task: str) -> "TaskEnv":
        """"stand" or "walk" (the shipped scenes, compiled in)."""
    @property
    def obs_dim(self) -> int: ...
    @property
    def act_dim(self) -> int: ...
    @property
    def steps(self) -> int:
        """Steps per episode."""
    @property
    def action_limit(self) -> float: ...
    @property
    def dt(self) -> float:
        """Control period (s)."""
    def reset(self, seed: int) -> Array:
        """The episode of `seed`: observation [obs_dim]."""
    def step(self, action: Array) -> tuple[Array, float, bool, bool]:
        """(observation, reward, terminated, truncated)."""

def cito(
    sim: Simulation, settings: Optional[dict] = None, callback: Optional[Callable[[int, float], None]] = None
) -> tuple[dict, Array, Array]:
    """CITO from sim's state: summary, xs [T + 1, nq + nv], us [T, nu]."""

def fd_transition(sim: Simulation, u: Optional[Array] = None, eps: float = 1e-6) -> tuple[Array, Array, str]:
    """A [2nv, 2nv], B [2nv, nu] by central differences through integrate, and the step status."""

def rollout_jacobians(
    model: Model,
    x0s: Array,
    us: Array,
    sensitivity: str = "relaxed",
    kappa: float = 1e-4,
    delta: float = 1e-3,
    dt: float = 0.002,
    friction: float = 0.8,
) -> tuple[Array, Array, Array, npt.NDArray[np.uint64]]:
    """rollout's states [N, T + 1, nq + nv], A [N, T, 2nv, 2nv], B [N, T, 2nv, nu], steps [N]."""
