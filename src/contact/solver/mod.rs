//! Forward contact solver: exact Coulomb friction (second-order cone) by a primal-dual
//! interior-point method on the cone complementarity problem.
//!
//! # Problem
//! For `k` contacts the step gives the Delassus matrix `G` (`3k x 3k`, symmetric positive
//! *semi*-definite), the free-contact term `b` (`3k`) and friction coefficients `mu` (`k`).
//! Per contact `i` the unknown impulse is `lambda_i = (l_n, l_t1, l_t2)` and the contact velocity
//! after the step is `w = G lambda + b`, `w_i = (w_n, w_t)`. The contact law is Signorini plus
//! Coulomb with maximal dissipation:
//!
//! ```text
//! 0 <= l_n  _|_  w_n >= 0
//! ||l_t|| <= mu l_n,   sliding: l_t = -mu l_n w_t / ||w_t||,   sticking: w_t = 0
//! ```
//!
//! (De Saxce & Feng: `lambda_i in K_mu`, `(w_n + mu ||w_t||, w_t) in K_mu^*`, complementary.)
//! The cone is the exact second-order cone, never a pyramid.
//!
//! # Formulation (Dojo's "nonlinear friction cone", Howell et al. 2022)
//! Per contact the unknowns are `gamma = l_n`, a normal-velocity slack `s`, `l_t` (2) and a scalar
//! `psi` (the dual of the friction cone). With `beta = (mu gamma, l_t)` and `eta = (psi, w_t)`,
//! both in the 3-D second-order cone `Q = {(x0, x1): x0 >= ||x1||}`, the relaxed system is
//!
//! ```text
//! s - w_n(lambda) = 0
//! gamma s         = kappa
//! beta o eta      = kappa e,     x o y = (x^T y, x0 y1 + y0 x1),  e = (1, 0, 0)
//! ```
//!
//! At `kappa = 0` this is exact Coulomb: `beta o eta = 0` with both in `Q` means either `w_t = 0`
//! (sticking, `psi = 0` when `beta` is interior) or `beta` and `eta` on opposite rays of the
//! cone boundary, `psi = ||w_t||` and `l_t = -mu gamma w_t / ||w_t||` (sliding).
//!
//! **Newton step (Nesterov-Todd scaled).** The slack and normal pairs are linearized as they
//! stand: `ds = dw_n - (s - w_n)` and `s d gamma + gamma ds = kappa - gamma s`. The cone pair is
//! linearized in the Nesterov-Todd scaling of `(beta, eta)`, as primal-dual conic solvers do
//! (ECOS, Domahidi et al. 2013; CVXOPT, Vandenberghe 2010): with `W` the symmetric matrix for
//! which `W eta = W^-1 beta = lambda` (the scaling point), the step solves
//!
//! ```text
//! lambda o (W^-1 d beta + W d eta) = kappa e - lambda o lambda
//! i.e.  W^-1 d beta + W d eta = r_hat = -lambda + kappa lambda^-1
//! ```
//!
//! with `Arw(lambda)^-1` applied in closed form (`Arw(x) = [[x0, x1^T], [x1, x0 I]]` is the arrow
//! matrix, `x o y = Arw(x) y`). For this scaling `lambda o lambda = kappa e` exactly when
//! `beta o eta = kappa e`, so the scaling changes the search direction, not the central path or
//! the answer. It symmetrizes only the cone pair's linearization: the friction law is not
//! associated, so the whole system is still not the KKT system of a conic program.
//!
//! The step is reduced to `3k x 3k` in `d lambda`: `ds` is eliminated with the slack equation,
//! and `d eta = W^-1 r_hat - W^-2 d beta` with `d beta = diag(mu, 1, 1) d lambda_i` gives
//! `dpsi` (row 0) and ties `dw_t` (rows 1-2) to `d lambda_i`. The reduced matrix is
//! `G~ + blkdiag(Lambda_i) + rho I`, with `Lambda_i` row 0 = `(s/gamma, 0, 0)` and rows 1-2 the
//! last two rows of `W_i^-2 diag(mu_i, 1, 1)`. It is not symmetric (row 0 comes from the normal
//! pair, and the `mu` column scaling), so it is factorized by the dense LU of
//! [`crate::linalg`] with partial pivoting and absolute pivots (rows of separated contacts carry
//! `s/gamma` up to ~1e20) into preallocated buffers. `rho` (the `regularization` setting,
//! relative to the largest diagonal entry of `G`) keeps the matrix invertible when `G` is rank
//! deficient and contacts are sticking (then `Lambda_i -> 0`). The scaling and the
//! regularization only change the search direction; every residual is evaluated exactly, on the
//! unscaled `beta o eta`.
//!
//! **Centering.** Mehrotra predictor-corrector: an affine step (`kappa = 0`) predicts how far the
//! complementarity can drop; the corrector targets `kappa = max(sigma mu_c, kappa_target)` with
//! `sigma = (mu_aff / mu_c)^3`, `mu_c = sum_i (gamma_i s_i + beta_i^T eta_i) / (2k)`, and the
//! second-order terms `d gamma_aff d s_aff` and, in the scaled variables,
//! `(W^-1 d beta_aff) o (W d eta_aff)`. Both solves reuse one LU (and one scaling).
//! The step length is `min(1, tau alpha_max)` with `tau` the fraction-to-boundary (0.99) and
//! `alpha_max` the largest step keeping `gamma, s > 0` and `beta, eta` in the cone, so every
//! iterate satisfies `gamma > 0`, `s > 0`, `mu gamma > ||l_t||`, `psi > ||w_t||` strictly.
//! Because rounding (a cancelling cone determinant, `w` recomputed from `lambda`) could still
//! leave the interior, each new iterate is checked exactly as the next iteration evaluates it and
//! the step is halved until it passes. **Fast finish:** with `tau` fixed the last steps converge
//! only by a factor `1 - tau` each, so when the mean complementarity is below `1e-3` a step with
//! `tau = 1 - 1e-9` is tried first and kept only if it cuts the residual by `1e-3` (or lands below
//! `0.1 tolerance`); a warm-started standing solve then takes 2 iterations instead of 3 (without
//! the sticking step of "Warm start" below, which solves it outright).
//!
//! **Fixed kappa.** [`ContactSolver::solve_central_path`] solves the same system at a fixed
//! `kappa > 0` by the same scaled Newton steps aimed at that `kappa` (no predictor, no
//! corrector), for relaxed sensitivities. [`ContactSolver::newton_matrix`] gives the reduced
//! Jacobian of the relaxed residual at the answer, unscaled and without `rho` (rows 1-2 of
//! `Lambda_i` are those of `Arw(beta)^-1 Arw(eta) diag(mu, 1, 1)`), which is what the
//! implicit-function derivative needs.
//!
//! # Globalization (after a stall)
//! The friction law is not associated, so the interior-point iteration above has no descent
//! guarantee: on hard problems (ill-conditioned `G`, impulses far above the scale `L`, strong
//! normal-tangential coupling in `G`, `mu` near 2) it jams against a cone boundary, typically
//! near a small "sliding" impulse whose slip friction would accelerate, while the solution
//! sticks with an impulse hundreds of times larger. When the whole Coulomb iteration (warm
//! start, then cold start, each with its stall restarts, then the singular-matrix retry) ends
//! in `MaxIterations` or `LinearSolveFailed`, a globalized phase with its own budget
//! (`global_iterations`, default 3000) takes over (in the hard solve; fixed-`kappa` solves are
//! not globalized). Every solve that converges without it is bit for bit what it was (same
//! path, same iterations): the phase only ever starts where the old solver gave up.
//!
//! **Restarts.** First the Coulomb iteration is restarted three times (at most 400 iterations
//! each) with the fraction to the boundary cut from 0.99 to 0.3 or 0.5, which keeps iterates
//! away from the boundaries where they jam: from the *sticking start* (every approaching
//! contact stopped, `G~_AA lambda~_A = -b~_A`, moved inside the cones by the warm-start
//! construction) centered at `1e-4`, then from `lambda = 0` centered at `1e-4` and at `1e-2`.
//!
//! **Fixed point.** Then the fixed point of Cadoux on the De Saxce shift (Acary, Cadoux,
//! Lemarechal, Malick 2011), from the best iterate so far: with the shift `sig_i >= 0` frozen,
//! the Coulomb problem becomes the *associated* (convex) cone complementarity problem
//!
//! ```text
//! beta_i = (mu gamma, l_t) in Q,   z_i = ((w_n + mu sig_i) / mu, w_t) in Q,   beta_i o z_i = 0
//! ```
//!
//! (`z_i in Q` iff `w_i + (mu sig_i, 0, 0)` is in the dual cone `K_mu^*`), the optimality
//! system of `min 1/2 lambda^T G lambda + (b + c)^T lambda` over `lambda in K_mu`, `c_i = (mu sig_i, 0, 0)`;
//! at `sig_i = ||w_t,i||` its solution is a Coulomb solution. Each convex problem is solved from a
//! centered cold start by the same Nesterov-Todd scaled Mehrotra method, with `z` a slack whose
//! residual `r_p = z - D (G lambda + b + c)` is driven to zero (an infeasible start; reduced
//! matrix `G~ + blkdiag(D^-1 W^-2 M)`, `D = diag(1/mu, 1, 1)`, `M = diag(mu, 1, 1)`); a monotone
//! problem, where Mehrotra's method is reliable. Then `sig <- ||w_t(lambda)||`. The fixed point
//! converges only linearly (and not at all for some large `mu`), so every fixed-point iterate is
//! also handed to the Coulomb iteration as a warm start (at most 120 iterations, its stall
//! restarts included), which finishes quadratically when it does not jam; otherwise the fixed
//! point resumes.
//!
//! **Enumeration.** Last, the contact modes are enumerated. At a Coulomb solution each contact
//! is separated (`lambda_i = 0`, `w_n >= 0`), sticking (`w_i = 0`, `lambda_i in K_mu`) or sliding
//! (`w_n = 0`, `lambda_i = gamma (1, -mu cos th, -mu sin th)`, `gamma >= 0`, `w_t` along
//! `(cos th, sin th)`). With the modes fixed the unknowns `y = (lambda_S, (gamma, th)_D)` solve
//! the square system
//!
//! ```text
//! F(y) = [ w_i (sticking i);  w_n,i  and  w_t1,i sin th_i - w_t2,i cos th_i (sliding i) ] = 0
//! ```
//!
//! linear but for the slip angles. It is solved by variable projection (Golub & Pereyra 1973):
//! the impulses by least squares at fixed angles, Gauss-Newton on the angles alone with a
//! forward-difference Jacobian and a backtracking line search on `|F|`; then Newton on every
//! unknown at once with the analytic Jacobian (a *polish*: the forward-difference angles stop
//! about `1e-8` from the answer, and the cone products weigh that by `|lambda~|`, up to `1e4`
//! and more). Pseudo-inverses (one-sided Jacobi SVD, relative cut-off `1e-13`) give the
//! least-norm step where `G` is singular, since a rank-deficient `G` makes the solutions of a
//! mode set an affine set (a contact pushing a dof that several contacts share). The least-norm
//! point of that set may leave a cone, so the answer is then moved along the set's directions
//! (the null space of the impulse columns of `J` at the final angles) by cyclic projections onto
//! the most violated linearized constraint (Polyak's step for a convex feasibility problem)
//! until every sticking impulse is inside its cone, every sliding `gamma` positive and every
//! separated `w_n` non-negative. Last, the mode equations are polished again with every sliding
//! impulse on the ray of `mu (1 - eps)`, `eps` in `[4 eps_mach, 1e-12]`, and every separated
//! contact at a normal impulse `1e-3 tol / (|lambda~|_inf max(1, w_n, (1 + mu) |w_t|))`, so the
//! answer is strictly inside the cones as every iterate is. (Scaling the answer into the cones
//! afterwards moves `w` by `G` times the nudge, which the cone products weigh by `|lambda~|`: at
//! `|lambda~| ~ 1e3` a relative nudge of `4 eps_mach` alone cost `6e-8` of residual.) It is
//! accepted only if the convergence test below passes. The mode sets tried: the one the guess
//! suggests (read as [`classify`] reads an answer), then, for `k <= 5`, every other (`3^k <=
//! 243`), and for larger `k` those that change the modes of one or two contacts. This is the
//! enumerative approach to the discrete problem (Acary & Brogliato 2008 survey it); it costs a
//! `3k x 3k` SVD per Newton step and runs only after every stage above has stalled.
//!
//! Each mode set is solved from the guess's slip angles and from the free slip's direction,
//! and a set with exactly one sliding contact also from its exact slip angles
//! (`slip_roots.rs`): with one angle `th`, `F = M(th) x + r(th)` has one equation more than
//! impulse unknowns, so it is solvable exactly where `det [M(th) | r(th)] = 0`, a trigonometric
//! polynomial of degree two (only the slider's `gamma` column and its tangent row depend on
//! `th`, affinely in `(cos th, sin th)`). Its at most four zeros come from the discrete Fourier
//! transform of eight samples, bracketed on a fine grid and bisected; Gauss-Newton on the angle
//! can miss them where `|F|` has another local minimum.
//!
//! The enumeration reads its guess from four places in turn, stopping at the first that
//! converges: the phase's best iterate; projected Gauss-Seidel on De Saxce's fixed point
//! (`nsgs.rs`, up to `10^6` sweeps); Cadoux's fixed point run to its own limit without the
//! hand-offs (from `sig = 0`, at most 200 convex solves, plain and then with the shift damped,
//! `sig <- (1 - d) ||w_t|| + d sig` for `d = 0.5, 0.8, 0.95`, the Krasnosel'skii-Mann remedy
//! where the plain iteration cycles, as it does on some singular `G`); and a Tikhonov
//! continuation (`continuation.rs`): `G~ + eps I` from `eps = 0.1`, solved from projected
//! Gauss-Seidel's answer, then each smaller `eps` (tenfold, a smaller step after a failure)
//! from the last answer, down to `eps = 0`, which follows a solution whose impulses grow as
//! the regularization lets them.
//!
//! **Alart-Curnier.** Where all of that fails, the very last stage (`alart_curnier.rs`) solves
//! Coulomb's law written as one piecewise-smooth equation (Alart & Curnier 1991): per contact,
//! with `r_n = l_n - rho_i w_n`, `z = l_t - rho_i w_t` and `rho_i = s / ||G~_ii||_F`,
//!
//! ```text
//! F_n = l_n - max(r_n, 0) = 0,        F_t = l_t - P_{D(mu max(r_n, 0))}(z) = 0
//! ```
//!
//! (`P_D(R)` the projection on the disk of radius `R`), whose zeros are exactly the Coulomb
//! solutions. A semismooth Newton iteration on an element of its generalized Jacobian takes the
//! LU step where `J` is safely invertible (pivots above `1e-10` of its largest entry) and the
//! least-norm pseudo-inverse step otherwise (a sticking contact's rows are `rho_i G~_i`,
//! singular with `G~`); Armijo backtracking on `|F|^2`, and a steepest-descent step on `|F|^2`
//! where the Newton direction does not descend (the classic globalization of Newton on a
//! nonsmooth equation, Qi & Sun 1993; Facchinei & Pang 2003, ch. 8). A start ends when `|F|^2` has
//! not halved in 50 iterations. Since `|F|^2` has local minima that are not zeros, the
//! iteration is restarted, up to 200 times sharing 40 000 iterations, from `lambda = 0`, the
//! phase's best iterate, and then random impulses inside the cones (normal impulses
//! log-uniform over `1e-3..1e3` impulse scales) with random scales `s` in `1e-2..1e2`; every
//! other start follows a continuation in `mu` from 0 (`mu = 0` is a convex problem) in quarter
//! steps. The generator is seeded, so a problem always takes the same path. A start that ends
//! with `|F|_inf <= 1e-6 max(1, |lambda~|_inf)` hands its modes to the enumeration (the mode set
//! it suggests, no neighbours), which finishes the answer inside the cones and accepts it only
//! if the convergence test passes. Its iterates may leave the cones; only the enumeration's
//! answer becomes the solver's iterate. Siconos's frictional contact solvers use the same
//! function (Acary et al. 2018 compare them on FCLIB and find no method that solves every
//! problem either).
//!
//! None of this is a descent method with a guarantee (none is known for the discrete Coulomb
//! problem with `mu` unrestricted). If the phase does not converge, the best iterate met (or the
//! stalled one) is returned with the status the Coulomb iteration had. Every iterate stays
//! strictly inside the cones.
//!
//! **The rounding floor.** `w~ = G~ lambda~ + b~` cannot be computed to better than about
//! `dw = eps (3k |lambda~|_inf + |b~|_inf)`. Along a soft direction of an ill-conditioned `G`
//! the solution's normalized impulses reach `1e4` to `1e7` (a contact pushing a near-immovable
//! dof), and there the absolute `1e-8` of the complementarity is below what floating point can
//! certify. A solve therefore also counts as `Converged` when every slack equation is within
//! `max(tol, 4 dw)` and every complementarity product within `max(tol, 4 dw c_i)`, `c_i =
//! (1 + mu_i) gamma~_i + ||l~_t,i||` the impulse that multiplies the velocity error. For
//! `|lambda~|` below about `1e3` both floors are under the default tolerance and the test is
//! exactly `residual <= tol`.
//!
//! What it does, measured on `tests/contact_solver_random.rs` (100 000 problems, k = 1..8,
//! `cond(G)` up to 1e8, every problem provably solvable, seed 16; the phase's constants were
//! chosen on seed 17): stalls 7 974 without the phase, 2 747 with the fixed point alone
//! (budget 1200), 2 072 with the rounding floor added, 530 with the restarts and a budget of
//! 3000 (261 SPD, 269 rank-deficient), 44 with the mode enumeration (19 SPD, 25
//! rank-deficient), 15 with its polish and inside-the-ray solve, 0 with the plain fixed points
//! and the continuation (still 0 with the exact slip angles of one slider and with
//! Alart-Curnier). Before Alart-Curnier nine other seeds (17-25) left nine stalls in 900 000,
//! all rank-deficient; with it three of those nine are left, and five seeds first run with it
//! (31-35) have none, where the code without it leaves one. So 0 is not a guarantee; the
//! test's module docs say how the last stages were chosen and what is left.
//!
//! # Scaling and the residual
//! Everything is solved in normalized units so that tolerances are dimensionless and the iterates
//! do not depend on the units of the problem:
//!
//! ```text
//! V = max_i max(-b_n,i, ||b_t,i||)        (approach velocity; ||b||_inf if that is 0, 1 if b = 0)
//! g = max_j G_jj                          (1 if G has a zero diagonal)
//! L = V / g                               (impulse that stops V through the stiffest direction)
//! lambda~ = lambda / L,  w~ = w / V,  b~ = b / V,  G~ = G / g
//! ```
//!
//! `V` ignores large positive `b_n` on purpose: a foot far above the ground (`b_n = +500`) must not
//! loosen the tolerance of the feet that carry the robot. The reported residual is
//!
//! ```text
//! residual        = max(max_i |s~_i - w~_n,i|, complementarity)
//! complementarity = max_i max(gamma~_i s~_i, |beta~_i^T eta~_i|, ||mu gamma~_i w~_t,i + psi~_i l~_t,i||_inf)
//! ```
//!
//! i.e. the infinity norm of the `kappa = 0` residual in normalized units (for
//! [`ContactSolver::solve_central_path`] the complementarity terms are measured against `kappa`).
//! The solve is `Converged` when `residual <= tolerance` (default `1e-8`), or at the rounding
//! floor of the residual where that is larger ("Globalization" above). The tangential part of
//! the Jordan product is included because `beta^T eta` alone only bounds the misalignment of
//! `l_t` and `-w_t` by its square root.
//!
//! # Warm start
//! A previous `lambda` is moved strictly inside the cone: `l_n` is raised so that
//! `l_n s >= mu0` and `||l_t||` is capped at `(1 - sqrt(mu0)) mu l_n`, then `s` and `psi` are set so
//! that every complementarity pair is about `mu0 = warm_start_mu` (normalized). A cold start is the
//! same construction from `lambda = 0` with `mu0 = 1`. If a warm-started solve does not converge
//! it is restarted cold (the iterations add up and `warm_started` is reported `false`).
//!
//! **Sticking step.** Before that, a hard solve whose warm start loads every contact
//! (`l_n > 0`) tries the answer in which every contact sticks: `G~ lambda~ = -b~`, so `w = 0`.
//! If every impulse lies strictly inside its cone that is an exact Coulomb solution (each
//! contact sticks with `w_n = 0 <= l_n`), and it is returned (`Converged`, no iterations) once
//! the convergence test below passes at it with `s = max(w_n, 0)`, `psi = ||w_t||`. This is
//! the standing robot's step: one factorization of `G~` instead of an iteration. Otherwise
//! (an unloaded contact, a singular `G`, an impulse outside its cone) the warm start goes to
//! the iteration unchanged. A fixed-`kappa` solve starts instead from the warm start with its
//! loaded pairs on its own central path (`gamma s = kappa`, the gap `s - w_n` left to Newton's
//! exact step on that linear constraint).
//!
//! # Realized modes
//! [`classify`]: `Separated` if `l_n <= separated_impulse` (absolute, N s) or `w_n >= G_nn l_n`,
//! else `Sticking` if `||w_t|| <= sticking_velocity` (absolute, m/s), else `Sliding`.
//!
//! The second test decides which side of the normal complementarity `0 <= l_n _|_ w_n >= 0` is
//! zero by comparing the two in one unit: the normal velocity `w_n` against `G_nn l_n`, the
//! velocity the contact's own impulse makes. It is needed because an interior-point answer
//! leaves `l_n w_n` at about the final centering `c`: a contact that separates slowly keeps a
//! residual impulse of about `c / w_n`, which an absolute threshold alone labels as pressing.
//! The exact sensitivity then differentiates a constraint that is not there (a foot lifting off
//! at 1 cm/s with `l_n = 3e-9` N s gave a transition Jacobian off by 140 %, and BPTT's
//! gradient of a 2-step walk rollout off by 45 %; `tests/learn_walk_gradient.rs`).
//!
//! # References
//! - T. Howell, S. Le Cleac'h, J. Bruedigam, Z. Kolter, M. Schwager, Z. Manchester,
//!   "Dojo: A Differentiable Physics Engine for Robotics" (2022).
//! - M. Anitescu, "Optimization-based simulation of nonsmooth rigid multibody dynamics",
//!   Math. Program. 105 (2006).
//! - G. De Saxce, Z.-Q. Feng, "The bipotential method: a constructive approach to design the
//!   complete contact law with friction and improved numerical algorithms", Math. Comput.
//!   Model. 28 (1998).
//! - S. Mehrotra, "On the implementation of a primal-dual interior point method", SIAM J. Optim.
//!   2 (1992).
//! - Y. Nesterov, M. Todd, "Primal-dual interior-point methods for self-scaled cones", SIAM J.
//!   Optim. 8 (1998).
//! - A. Domahidi, E. Chu, S. Boyd, "ECOS: An SOCP solver for embedded systems", European Control
//!   Conference (2013).
//! - L. Vandenberghe, "The CVXOPT linear and quadratic cone program solvers" (2010).
//! - V. Acary, F. Cadoux, C. Lemarechal, J. Malick, "A formulation of the linear discrete
//!   Coulomb friction problem via convex optimization", ZAMM 91 (2011): the fixed point on the
//!   De Saxce shift and the existence condition (some velocity puts `J v + b` inside `K_mu^*`).
//! - V. Acary, B. Brogliato, "Numerical Methods for Nonsmooth Dynamical Systems", Springer (2008).
//!
//! # Layout
//! [`Settings`], [`Status`] and [`Info`] in `settings.rs`; [`ContactMode`] and the classifiers in
//! `modes.rs`; the iteration ([`ContactSolver`]) in `interior_point.rs`, its globalized phase in
//! `interior_point/globalize.rs` and its mode enumeration in `interior_point/enumerate.rs`; the
//! second-order-cone algebra (Jordan product, arrow matrices, Nesterov-Todd scaling, step to the
//! boundary) in `cone.rs`; the dense LU and the Jacobi SVD in [`crate::linalg`].

mod cone;
mod interior_point;
mod modes;
mod settings;

pub use interior_point::ContactSolver;
pub use modes::{classify, classify_all, ContactMode};
pub use settings::{valid_warm_start_mu, Info, Settings, SettingsError, Status};
