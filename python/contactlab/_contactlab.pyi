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
        """"quadruped", "hopper" or "legged<N>" (N = 4, 6, ..., 20 legs)."""
    @staticmethod
    def from_urdf(
        path: Path, floating: bool = True, contacts: Optional[list[Union[str, dict]]] = None
    ) -> "Model":
        """contacts: frame names, or dicts {frame, position [3] (m, in the frame), radius (m)};
        default: links named *foot. Raises ValueError naming the file and element, or the entry."""
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
    @property
    def body_names(self) -> list[str]: ...
    @property
    def actuated_joints(self) -> list[str]:
        """[nu], the order of u."""
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
        """Per contact point (k = len(Model.contact_names)), its nearest terrain contact: gap [k]
        (m), impulse [k, 3] (N s), mode: list of k strings. A second contact in a concave corner
        (a foot against a step's face) is not listed."""

def transition_jacobians(
    sim: Simulation,
    u: Optional[Array] = None,
    sensitivity: str = "relaxed",
    kappa: float = 1e-4,
    delta: float = 1e-3,
    q: Optional[Array] = None,
    v: Optional[Array] = None,
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

def builtin_urdf(name: str) -> str:
    """The URDF text of a builtin robot (Model.builtin's names)."""

def cito_solve(
    sim: Simulation, settings: Optional[dict] = None, callback: Optional[Callable[[int, float], None]] = None
) -> tuple[dict, Array, Array]:
    """CITO from sim's state (contactlab.cito.solve): summary, xs [T + 1, nq + nv], us [T, nu]."""

def rollout_gradient(
    sim: Simulation,
    steps: int,
    cost: dict,
    sensitivity: str = "relaxed",
    kappa: float = 1e-4,
    delta: float = 1e-3,
    param: Optional[str] = None,
) -> dict:
    """Adjoint gradient of a closed-loop rollout's cost: cost, grad_x0 [2nv] (tangent), grad_u
    [steps, nu], grad_param (param: base_x|base_y|base_z|pull:N|torque:JOINTS), modes [steps, k]
    (0 separated, 1 sticking, 2 sliding), backward_not_converged, q_final [nq], v_final [nv].
    cost: running, terminal, q_ref [nq], w_q [nv], w_v [nv], w_u [nu], points: [{body, point,
    target, weight, linear, linear_velocity}]."""

def rollout_cost(sim: Simulation, steps: int, cost: dict) -> float:
    """The same rollout's cost through Simulation.step alone (the finite-difference reference)."""

class Mpc:
    """Closed-loop contact-implicit MPC driving a Simulation (settings: the mpc section's fields).
    Use it from the thread that created it."""

    def __init__(self, settings: Optional[dict] = None) -> None: ...
    @property
    def settings(self) -> dict: ...
    def engage(self, sim: Simulation) -> None:
        """Take over at sim's present state (the controller is switched off)."""
    def release(self, sim: Simulation) -> None:
        """Give the controller back."""
    def step(self, sim: Simulation) -> tuple[str, Optional[dict]]:
        """Replan at a period's start, then step: (step status, replan dict or None)."""
    def run(self, sim: Simulation, seconds: float, callback: Optional[Callable[[dict], None]] = None) -> dict:
        """Closed loop for `seconds`; callback(replan dict) after every replan. Returns steps,
        cycles, failed_replans, failed_step."""
    def set_target(self, position: Array, rotation: Optional[Array] = None) -> None:
        """position [3] (m), rotation [3, 3] world from base; applied at the next replan."""
    @property
    def target(self) -> Optional[tuple[Array, Array]]: ...
    @property
    def planned_states(self) -> Array:
        """[knots + 1, nq + nv]"""
    @property
    def knots(self) -> int: ...
    @property
    def substeps(self) -> int: ...

class TossDataset:
    """Cube tosses (contactlab.contactnets), scaled units."""

    @staticmethod
    def load(dir: Path) -> "TossDataset":
        """Raises ValueError naming the file, line and field of a bad CSV."""
    def __len__(self) -> int: ...
    @property
    def names(self) -> list[str]: ...
    def toss(self, index: int) -> tuple[Array, Array, Array, Array, Array]:
        """t [T], position [T, 3], quaternion [T, 4] (x y z w), velocity [T, 3], angular velocity [T, 3]."""

class ContactModel:
    """A learned contact model (contactlab.contactnets)."""

    @staticmethod
    def load(path: Path) -> "ContactModel": ...
    def save(self, path: Path) -> None: ...
    @property
    def method(self) -> str: ...
    @property
    def mu(self) -> float: ...
    @property
    def vertices(self) -> Array:
        """[n, 3], body frame, scaled units."""
    @property
    def vertex_error(self) -> float: ...
    @property
    def info(self) -> dict: ...
    def rollout(self, data: TossDataset, index: int) -> tuple[Array, Array, Optional[str]]:
        """position [T, 3], quaternion [T, 4], failure."""

def contactnets_train(
    data: TossDataset, tosses: int, settings: Optional[dict] = None, callback: Optional[Callable[[int], None]] = None
) -> tuple[ContactModel, dict]: ...
def contactnets_evaluate(
    model: ContactModel, data: TossDataset, tosses: Optional[list[int]] = None, threads: int = 2
) -> dict: ...

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
