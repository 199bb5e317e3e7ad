//! Mode enumeration: the last stage of the globalized phase (math in the
//! [module docs](super::super), "Enumeration"). A Coulomb solution puts each contact in one of
//! three modes, and once the modes are fixed the problem is a small system of equations,
//! linear but for the slip angles of the sliding contacts. Starting from the modes the best
//! iterate of the phase suggests, candidate mode sets are solved by variable projection
//! (impulses by least squares through a pseudo-inverse, since a singular `G` leaves whole
//! affine sets of solutions; slip angles by Gauss-Newton), polished by Newton on every unknown,
//! moved inside the cones along that set where they have to be, solved once more on rays a hair
//! inside the cones, and accepted only when the solver's own convergence test passes. The
//! guesses come from the phase's best iterate, projected Gauss-Seidel, Cadoux's fixed point run
//! to its limit (plain and damped) and a Tikhonov continuation, in that order. It runs only
//! where everything before it stalled.

use super::super::cone::norm2;
use super::ContactSolver;
use crate::contact::solver::{Info, Settings, Status};
use crate::linalg::{svd_jacobi, svd_step};

/// Contact modes of a candidate.
const SEPARATED: u8 = 0;
const STICKING: u8 = 1;
const SLIDING: u8 = 2;
/// Every mode set is tried for at most this many contacts (`3^5 = 243` sets); above it, the
/// guess and the sets that change one or two of its contacts.
const FULL_K: usize = 5;
const MAX_CHANGES: usize = 2;
/// Mode sets tried from one guess at most (129 for eight contacts; it bounds the cost for more).
const MAX_SETS: usize = 300;
/// Gauss-Newton iterations on the slip angles per mode set and start.
const NEWTON_ITERATIONS: usize = 30;
/// Relative cut-off of the pseudo-inverse and of the null space (singular values below it
/// times the largest count as zero).
const RANK_CUTOFF: f64 = 1e-13;
/// Newton iterations of the polish on all unknowns.
const POLISH_ITERATIONS: usize = 20;
/// Sweeps of projected Gauss-Seidel before the second enumeration.
const NSGS_SWEEPS: usize = 1_000_000;
/// Convex solves of the plain fixed point, and the iterations they share.
const PLAIN_OUTER: usize = 200;
const PLAIN_BUDGET: usize = 20_000;
/// Their damping of the shifts: `sig <- (1 - d) |w_t| + d sig`.
const PLAIN_DAMPING: [f64; 4] = [0.0, 0.5, 0.8, 0.95];
/// Projections of the interior search in the null space.
const INTERIOR_ITERATIONS: usize = 500;

impl ContactSolver {
    /// Tries mode sets from the current iterate (the phase's best, `w` up to date), then from
    /// where projected Gauss-Seidel takes it, then from the plain fixed points' last iterates,
    /// then along the Tikhonov continuation. On success the iterate is the accepted answer and
    /// `info` says `Converged`; otherwise the iterate is restored and `info` is untouched but for
    /// the iterations.
    pub(super) fn enumerate_modes(&mut self, settings: &Settings, info: &mut Info) -> bool {
        let n = 3 * self.k;
        self.glam[..n].copy_from_slice(&self.lam[..n]);
        if self.enumerate_from_iterate(settings, info, usize::MAX) {
            return true;
        }
        self.lam[..n].copy_from_slice(&self.glam[..n]);
        info.iterations += self.projected_gauss_seidel(NSGS_SWEEPS);
        self.update_w();
        if self.iterate_finite() && self.enumerate_from_iterate(settings, info, usize::MAX) {
            return true;
        }
        // Cadoux's fixed point run to its own limit, which the phase's hand-offs cut short,
        // plain and damped (where the plain one cycles).
        for damping in PLAIN_DAMPING {
            self.plain_fixed_point(settings, damping, PLAIN_OUTER, PLAIN_BUDGET, info);
            if self.iterate_finite() && self.enumerate_from_iterate(settings, info, usize::MAX) {
                return true;
            }
        }
        self.lam[..n].copy_from_slice(&self.glam[..n]);
        self.update_w();
        self.continue_in_regularization(settings, info) || self.alart_curnier(settings, info)
    }

    /// The enumeration from the guess the current iterate gives.
    pub(super) fn enumerate_from_iterate(&mut self, settings: &Settings, info: &mut Info, max_changes: usize) -> bool {
        let k = self.k;
        let n = 3 * k;
        let lmax = self.lam_inf();
        for i in 0..k {
            let (gam, wn) = (self.lam[3 * i], self.w[3 * i]);
            let (w1, w2) = (self.w[3 * i + 1], self.w[3 * i + 2]);
            let slip = norm2(w1, w2);
            // As `classify` reads an answer, in normalized units.
            self.emode[i] = if gam <= 1e-9 * lmax.max(1.0) || wn >= self.gt[3 * i * n + 3 * i] * gam {
                SEPARATED
            } else if slip <= 1e-6 {
                STICKING
            } else {
                SLIDING
            };
            self.eth0[i] = if slip > 0.0 { w2.atan2(w1) } else { (-self.lam[3 * i + 2]).atan2(-self.lam[3 * i + 1]) };
        }
        self.gbest[..n].copy_from_slice(&self.lam[..n]);
        let changes = max_changes.min(if k <= FULL_K { k } else { MAX_CHANGES });
        // Holds up to `max(FULL_K, MAX_CHANGES)` changed contacts.
        let mut idx = [0usize; FULL_K];
        let mut sets = 0;
        for d in 0..=changes {
            // Every set of `d` contacts (in lexicographic order), each changed to one of its two
            // other modes.
            for (j, slot) in idx[..d].iter_mut().enumerate() {
                *slot = j;
            }
            loop {
                for choice in 0..1usize << d {
                    self.etry[..k].copy_from_slice(&self.emode[..k]);
                    for (j, &c) in idx[..d].iter().enumerate() {
                        let bump = if choice >> j & 1 == 0 { 1 } else { 2 };
                        self.etry[c] = (self.emode[c] + bump) % 3;
                    }
                    if self.try_modes(settings, info) {
                        return true;
                    }
                    sets += 1;
                    if sets >= MAX_SETS {
                        return false;
                    }
                }
                if !next_combination(&mut idx[..d], k) {
                    break;
                }
            }
        }
        false
    }

    /// Solves the mode set `etry` from each start of the slip angles (those the best iterate
    /// suggests, then the directions of the free slip `b~_t`), moves the answer inside the cones
    /// and accepts it if the convergence test passes.
    fn try_modes(&mut self, settings: &Settings, info: &mut Info) -> bool {
        let k = self.k;
        let sliders = self.etry[..k].iter().filter(|&&m| m == SLIDING).count();
        let mut starts = if sliders > 0 { 2 } else { 1 };
        if sliders == 1 {
            // The exact slip angles (`slip_roots`), tried after the enumeration's own two.
            let q = self.init_unknowns(0);
            let a = self.ycol(self.etry[..k].iter().position(|&m| m == SLIDING).unwrap_or(0)) + 1;
            starts += self.slip_angle_roots(q, a);
        }
        for start in 0..starts {
            if self.try_start(settings, info, start) {
                return true;
            }
        }
        false
    }

    /// Sets the unknowns `ey` of the mode set `etry` from the best iterate, the slip angles from
    /// `start`: 0 the guess's, 1 the free slip's direction, `2 + r` the `r`-th exact angle of a
    /// single slider (`eroots`). Returns their number `q`.
    fn init_unknowns(&mut self, start: usize) -> usize {
        let mut q = 0;
        for i in 0..self.k {
            match self.etry[i] {
                STICKING => {
                    self.ey[q..q + 3].copy_from_slice(&self.gbest[3 * i..3 * i + 3]);
                    q += 3;
                }
                SLIDING => {
                    self.ey[q] = self.gbest[3 * i].max(0.0);
                    self.ey[q + 1] = match start {
                        0 => self.eth0[i],
                        1 => self.bt[3 * i + 2].atan2(self.bt[3 * i + 1]),
                        r => self.eroots[r - 2],
                    };
                    q += 2;
                }
                _ => {}
            }
        }
        q
    }

    fn try_start(&mut self, settings: &Settings, info: &mut Info, start: usize) -> bool {
        let k = self.k;
        // Unknowns y: lambda_i (3) per sticking contact, (gamma_i, theta_i) per sliding one.
        let q = self.init_unknowns(start);
        if q > 0 {
            self.solve_projected(q, info);
            self.polish(q, info);
        } else {
            self.mode_residual();
        }
        if !self.iterate_finite() {
            return false;
        }
        self.move_inside(q);
        // Strictly inside every cone: the mode equations solved again with every sliding
        // impulse on a ray a hair inside its cone and every separated contact at a residual
        // normal impulse. Nudging the answer instead moves `w` by `G` times the nudge, and the
        // cone products weigh that by `|lambda~|`: at `|lambda~| ~ 1e3` a nudge of 4 eps_mach
        // alone cost 6e-8 of residual.
        self.ey_from_lambda();
        let lmax = self.lam_inf().max(1.0);
        let mut slip_size = 0.0_f64;
        for i in 0..k {
            let w = &self.w[3 * i..3 * i + 3];
            match self.etry[i] {
                // The friction residual grows by eps mu gamma |w_t|.
                SLIDING => slip_size = slip_size.max(self.mu[i] * self.lam[3 * i] * norm2(w[1], w[2])),
                SEPARATED => {
                    // gamma w_n, mu gamma |w_t| and the Jordan product's tangent part scale
                    // with this gamma, and `w` of the others moves by `G` times it, weighed by
                    // their impulses.
                    let size = w[0].max((1.0 + self.mu[i]) * norm2(w[1], w[2])).max(1.0) * lmax;
                    self.esep[i] = 1e-3 * settings.tolerance / size;
                }
                _ => {}
            }
        }
        if slip_size > 0.0 {
            self.eslip = (1e-3 * settings.tolerance / slip_size).clamp(4.0 * f64::EPSILON, 1e-12);
        }
        if q > 0 {
            self.polish(q, info);
        } else {
            self.mode_residual();
        }
        // `lambda` and `w` are the last residual's: they stay as they are.
        self.eslip = 0.0;
        self.esep[..k].fill(0.0);
        self.set_coulomb_duals();
        let (res, _, margin) = self.residual(0.0);
        let accepted = margin > 0.0
            && (0..k).all(|i| self.lam[3 * i] > 0.0)
            && self.iterate_finite()
            && (res <= settings.tolerance || self.converged_at_floor(settings, 0.0));
        if accepted {
            info.status = Status::Converged;
            self.coulomb_residual(info);
        }
        accepted
    }

    /// One least-squares step of the impulse unknowns alone (the equations are linear in them):
    /// `dx = -J_x^+ F` at the present angles. Returns `|F|_2` after it.
    fn linear_step(&mut self, q: usize) -> f64 {
        let k = self.k;
        self.mode_residual();
        let m = self.mode_jacobian(q);
        svd_jacobi(&mut self.ejac[..q * m], q, m, &mut self.ev[..m * m], &mut self.esig[..m]);
        svd_step(&self.ejac, q, m, &self.ev, &self.esig, RANK_CUTOFF, &self.ef, &mut self.edy);
        // Impulse unknowns sit in y in contact order; angles are skipped.
        let (mut x, mut y) = (0, 0);
        for i in 0..k {
            match self.etry[i] {
                STICKING => {
                    for c in 0..3 {
                        self.ey[y + c] += self.edy[x + c];
                    }
                    (x, y) = (x + 3, y + 3);
                }
                SLIDING => {
                    self.ey[y] += self.edy[x];
                    (x, y) = (x + 1, y + 2);
                }
                _ => {}
            }
        }
        self.mode_residual()
    }

    /// Variable projection (Golub & Pereyra 1973): the impulses are eliminated by a
    /// least-squares solve at every value of the slip angles, and Gauss-Newton runs on the
    /// angles alone, with a forward-difference Jacobian. Leaves `lambda`, `w` and `F` at the
    /// last accepted angles.
    fn solve_projected(&mut self, q: usize, info: &mut Info) {
        let k = self.k;
        let mut d = 0;
        let mut y = 0;
        for i in 0..k {
            match self.etry[i] {
                STICKING => y += 3,
                SLIDING => {
                    self.eangle[d] = y + 1;
                    d += 1;
                    y += 2;
                }
                _ => {}
            }
        }
        let mut f = self.linear_step(q);
        for _ in 0..NEWTON_ITERATIONS {
            if d == 0 || f.is_nan() || f <= 1e-15 * (1.0 + self.lam_inf()) {
                break;
            }
            info.iterations += 1;
            self.er[..q].copy_from_slice(&self.ef[..q]);
            self.ey1[..q].copy_from_slice(&self.ey[..q]);
            for c in 0..d {
                let (a, h) = (self.eangle[c], 1e-7);
                self.ey[..q].copy_from_slice(&self.ey1[..q]);
                self.ey[a] += h;
                self.linear_step(q);
                for r in 0..q {
                    self.ejt[r * d + c] = (self.ef[r] - self.er[r]) / h;
                }
            }
            svd_jacobi(&mut self.ejt[..q * d], q, d, &mut self.evt[..d * d], &mut self.esigt[..d]);
            svd_step(&self.ejt, q, d, &self.evt, &self.esigt, RANK_CUTOFF, &self.er, &mut self.estep);
            let mut alpha = 1.0;
            let mut next = f64::INFINITY;
            while alpha >= 1e-6 {
                self.ey[..q].copy_from_slice(&self.ey1[..q]);
                for c in 0..d {
                    self.ey[self.eangle[c]] += alpha * self.estep[c];
                }
                next = self.linear_step(q);
                if next < (1.0 - 1e-4 * alpha) * f {
                    break;
                }
                alpha *= 0.5;
            }
            if next.is_nan() || next >= f {
                self.ey[..q].copy_from_slice(&self.ey1[..q]);
                self.linear_step(q);
                break;
            }
            f = next;
        }
    }

    /// Newton on every unknown of the mode set at once (impulses and slip angles) with the
    /// analytic Jacobian, from where variable projection stopped. Its forward-difference angles
    /// stall about `1e-8` from the answer on ill-conditioned sets, and the cone products weigh
    /// that error by `|lambda~|` (up to `1e4` and more): the solve then misses the tolerance by
    /// a factor of 10-100 although it is next to a solution.
    fn polish(&mut self, q: usize, info: &mut Info) {
        let mut f = self.mode_residual();
        for _ in 0..POLISH_ITERATIONS {
            if !f.is_finite() || f <= 1e-16 * (1.0 + self.lam_inf()) {
                break;
            }
            info.iterations += 1;
            self.full_jacobian(q);
            svd_jacobi(&mut self.ejac[..q * q], q, q, &mut self.ev[..q * q], &mut self.esig[..q]);
            svd_step(&self.ejac, q, q, &self.ev, &self.esig, RANK_CUTOFF, &self.ef, &mut self.edy);
            self.ey1[..q].copy_from_slice(&self.ey[..q]);
            let mut alpha = 1.0;
            let mut next = f64::INFINITY;
            while alpha >= 1.0 / 64.0 {
                for c in 0..q {
                    self.ey[c] = self.ey1[c] + alpha * self.edy[c];
                }
                next = self.mode_residual();
                if next < f {
                    break;
                }
                alpha *= 0.5;
            }
            if next.is_nan() || next >= f {
                self.ey[..q].copy_from_slice(&self.ey1[..q]);
                self.mode_residual();
                break;
            }
            f = next;
        }
    }

    /// The Jacobian of [`Self::mode_residual`] in every unknown `y` (`q x q`, row-major, into
    /// `ejac`): a slip angle moves `lambda_j` along `gamma_j (0, mu sin th, -mu cos th)` and
    /// turns its own contact's row `w_t x (cos th, sin th)` by `w_t . (cos th, sin th)`.
    fn full_jacobian(&mut self, q: usize) {
        let mut col = 0;
        for j in 0..self.k {
            let (mode, mu) = (self.etry[j], self.mu[j] * (1.0 - self.eslip));
            let yj = col;
            let count = match mode {
                STICKING => 3,
                SLIDING => 2,
                _ => 0,
            };
            for u in 0..count {
                let a: [f64; 3] = match (mode, u) {
                    (STICKING, _) => {
                        let mut e = [0.0; 3];
                        e[u] = 1.0;
                        e
                    }
                    (_, 0) => {
                        let th = self.ey[yj + 1];
                        [1.0, -mu * th.cos(), -mu * th.sin()]
                    }
                    _ => {
                        let (g, th) = (self.ey[yj], self.ey[yj + 1]);
                        [0.0, mu * g * th.sin(), -mu * g * th.cos()]
                    }
                };
                self.residual_column(j, a, col, q, mode == SLIDING && u == 1);
                col += 1;
            }
        }
    }

    /// Column `col` (row stride `cols`, into `ejac`) of a Jacobian of [`Self::mode_residual`]:
    /// the change of `F` when contact `j`'s impulse moves along `a` (`dw = G~ e_j a`), plus, for
    /// `turn`, the explicit derivative of contact `j`'s own sliding row in its slip angle.
    fn residual_column(&mut self, j: usize, a: [f64; 3], col: usize, cols: usize, turn: bool) {
        let k = self.k;
        let n = 3 * k;
        for r in 0..n {
            let row = &self.gt[r * n + 3 * j..r * n + 3 * j + 3];
            self.etmp[r] = row[0] * a[0] + row[1] * a[1] + row[2] * a[2];
        }
        // The rows of F, in the order of the unknowns.
        let mut row = 0;
        for i in 0..k {
            match self.etry[i] {
                STICKING => {
                    for c in 0..3 {
                        self.ejac[(row + c) * cols + col] = self.etmp[3 * i + c];
                    }
                    row += 3;
                }
                SLIDING => {
                    let (s, c) = self.ey[row + 1].sin_cos();
                    let mut cross = self.etmp[3 * i + 1] * s - self.etmp[3 * i + 2] * c;
                    if turn && i == j {
                        cross += self.w[3 * i + 1] * c + self.w[3 * i + 2] * s;
                    }
                    self.ejac[row * cols + col] = self.etmp[3 * i];
                    self.ejac[(row + 1) * cols + col] = cross;
                    row += 2;
                }
                _ => {}
            }
        }
    }

    /// The unknowns `ey` of the mode set `etry` read back from `lambda` (after the interior
    /// search moved it along the rays and the null space; the slip angles are unchanged).
    fn ey_from_lambda(&mut self) {
        let mut q = 0;
        for i in 0..self.k {
            match self.etry[i] {
                STICKING => {
                    self.ey[q..q + 3].copy_from_slice(&self.lam[3 * i..3 * i + 3]);
                    q += 3;
                }
                SLIDING => {
                    self.ey[q] = self.lam[3 * i];
                    q += 2;
                }
                _ => {}
            }
        }
    }

    /// Whether `lambda` and `w` are finite.
    pub(super) fn iterate_finite(&self) -> bool {
        let n = 3 * self.k;
        crate::linalg::all_finite(&self.lam[..n]) && crate::linalg::all_finite(&self.w[..n])
    }

    pub(super) fn lam_inf(&self) -> f64 {
        self.lam[..3 * self.k].iter().fold(0.0_f64, |m, x| m.max(x.abs()))
    }

    /// Sets `lambda` and `w` from the unknowns `ey` of the mode set `etry` and the residual
    /// `ef`: `w_i` (sticking), `w_n` and `w_t1 sin th - w_t2 cos th` (sliding: `w_t` along the
    /// slip direction `(cos th, sin th)`, the friction `-mu gamma` times it). Returns `|F|_2`.
    pub(super) fn mode_residual(&mut self) -> f64 {
        let k = self.k;
        let mut q = 0;
        for i in 0..k {
            let l = &mut self.lam[3 * i..3 * i + 3];
            match self.etry[i] {
                STICKING => {
                    l.copy_from_slice(&self.ey[q..q + 3]);
                    q += 3;
                }
                SLIDING => {
                    let (g, th, mu) = (self.ey[q], self.ey[q + 1], self.mu[i] * (1.0 - self.eslip));
                    l[0] = g;
                    l[1] = -mu * g * th.cos();
                    l[2] = -mu * g * th.sin();
                    q += 2;
                }
                _ => {
                    l.fill(0.0);
                    l[0] = self.esep[i];
                }
            }
        }
        self.update_w();
        let mut q = 0;
        let mut sum = 0.0;
        for i in 0..k {
            let w = &self.w[3 * i..3 * i + 3];
            match self.etry[i] {
                STICKING => {
                    self.ef[q..q + 3].copy_from_slice(w);
                    q += 3;
                }
                SLIDING => {
                    let th = self.ey[q + 1];
                    self.ef[q] = w[0];
                    self.ef[q + 1] = w[1] * th.sin() - w[2] * th.cos();
                    q += 2;
                }
                _ => {}
            }
        }
        for x in &self.ef[..q] {
            sum += x * x;
        }
        let f = sum.sqrt();
        if f.is_nan() {
            f64::INFINITY
        } else {
            f
        }
    }

    /// The Jacobian of [`Self::mode_residual`] in the impulse unknowns (`lambda_S`, `gamma_D`;
    /// the angles fixed) into `ejac` (`q x m`, row-major); returns `m`.
    pub(super) fn mode_jacobian(&mut self, q: usize) -> usize {
        let k = self.k;
        let cols = q - (0..k).filter(|&i| self.etry[i] == SLIDING).count();
        let mut col = 0;
        for j in 0..k {
            let (mode, mu) = (self.etry[j], self.mu[j] * (1.0 - self.eslip));
            // Each unknown of contact j moves lambda_j along `a`.
            let count = match mode {
                STICKING => 3,
                SLIDING => 1,
                _ => 0,
            };
            for u in 0..count {
                let a: [f64; 3] = if mode == STICKING {
                    let mut e = [0.0; 3];
                    e[u] = 1.0;
                    e
                } else {
                    let th = self.ey[self.ycol(j) + 1];
                    [1.0, -mu * th.cos(), -mu * th.sin()]
                };
                self.residual_column(j, a, col, cols, false);
                col += 1;
            }
        }
        cols
    }

    /// Index in `ey` of contact `j`'s first unknown.
    fn ycol(&self, j: usize) -> usize {
        self.etry[..j].iter().map(|&m| usize::from(m == STICKING) * 3 + usize::from(m == SLIDING) * 2).sum()
    }

    /// Moves the answer along the directions that leave the mode equations unchanged (the null
    /// space of their impulse Jacobian at the final angles; nonempty when `G` is singular) until
    /// every sticking impulse is strictly inside its cone, every sliding `gamma` positive and
    /// every separated contact's `w_n` non-negative, if it can: cyclic projections onto the
    /// linearized most violated constraint (a subgradient method with Polyak's step on a convex
    /// feasibility problem).
    fn move_inside(&mut self, q: usize) {
        let k = self.k;
        let n = 3 * k;
        if q == 0 {
            return;
        }
        let m = self.mode_jacobian(q);
        svd_jacobi(&mut self.ejac[..q * m], q, m, &mut self.ev[..m * m], &mut self.esig[..m]);
        let smax = self.esig[..m].iter().fold(0.0_f64, |a, &s| a.max(s));
        // Null directions, mapped to impulse space (n each) into `enull`.
        let mut p = 0;
        for j in 0..m {
            if self.esig[j] > RANK_CUTOFF * smax {
                continue;
            }
            let mut r = 0;
            for i in 0..k {
                let out = &mut self.enull[p * n + 3 * i..p * n + 3 * i + 3];
                match self.etry[i] {
                    STICKING => {
                        for c in 0..3 {
                            out[c] = self.ev[(r + c) * m + j];
                        }
                        r += 3;
                    }
                    SLIDING => {
                        let g = self.ev[r * m + j];
                        let l = &self.lam[3 * i..3 * i + 3];
                        // Along the ray: lambda_i / gamma_i times d gamma.
                        let ratio = if l[0] != 0.0 { g / l[0] } else { 0.0 };
                        out[0] = g;
                        out[1] = l[1] * ratio;
                        out[2] = l[2] * ratio;
                        r += 1;
                    }
                    _ => out.fill(0.0),
                }
            }
            p += 1;
        }
        if p == 0 {
            return;
        }
        let target = 1e-9 * (1.0 + self.lam_inf());
        for _ in 0..INTERIOR_ITERATIONS {
            // The most violated constraint and its gradient in impulse space (in `etmp`).
            let (mut worst, mut who) = (f64::INFINITY, usize::MAX);
            for i in 0..k {
                let l = &self.lam[3 * i..3 * i + 3];
                let v = match self.etry[i] {
                    STICKING => self.mu[i] * l[0] - norm2(l[1], l[2]),
                    SLIDING => l[0],
                    // A separated contact's w_n, in the same normalized units.
                    _ => (0..n).map(|c| self.gt[3 * i * n + c] * self.lam[c]).sum::<f64>() + self.bt[3 * i] + target,
                };
                if v < worst {
                    (worst, who) = (v, i);
                }
            }
            if worst >= target || who == usize::MAX {
                break;
            }
            let i = who;
            self.etmp[..n].fill(0.0);
            match self.etry[i] {
                STICKING => {
                    let l = &self.lam[3 * i..3 * i + 3];
                    let t = norm2(l[1], l[2]);
                    self.etmp[3 * i] = self.mu[i];
                    if t > 0.0 {
                        self.etmp[3 * i + 1] = -l[1] / t;
                        self.etmp[3 * i + 2] = -l[2] / t;
                    }
                }
                SLIDING => self.etmp[3 * i] = 1.0,
                _ => self.etmp[..n].copy_from_slice(&self.gt[3 * i * n..3 * i * n + n]),
            }
            // Gradient in null coordinates, then the Polyak step onto the linearization.
            let mut norm = 0.0;
            for a in 0..p {
                let g: f64 = (0..n).map(|c| self.enull[a * n + c] * self.etmp[c]).sum();
                self.edy[a] = g;
                norm += g * g;
            }
            if norm.is_nan() || norm <= 0.0 {
                break;
            }
            let step = (target - worst) / norm;
            for a in 0..p {
                let t = step * self.edy[a];
                for c in 0..n {
                    self.lam[c] += t * self.enull[a * n + c];
                }
            }
        }
        self.update_w();
    }
}

/// Advances `idx` (strictly increasing indices below `k`) to the next combination in
/// lexicographic order; `false` after the last (and for the empty combination).
fn next_combination(idx: &mut [usize], k: usize) -> bool {
    let d = idx.len();
    for j in (0..d).rev() {
        if idx[j] < k - d + j {
            idx[j] += 1;
            for t in j + 1..d {
                idx[t] = idx[t - 1] + 1;
            }
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DMatrix;

    /// The unknowns of the three-contact problems below.
    const Y: [f64; 5] = [0.3, -0.1, 0.05, 0.7, 0.4];

    /// A solver on a three-contact problem (an SPD `G` drawn from `(a, c, m)`) with its mode set
    /// one contact of each mode (sticking, sliding, separated) and its unknowns at `Y`.
    fn three_modes(a: usize, c: usize, m: usize) -> ContactSolver {
        let n = 9;
        let r = DMatrix::from_fn(n, n, |i, j| ((i * a + j * c) % m) as f64 / m as f64 - 0.42);
        let g = &r * r.transpose() + DMatrix::identity(n, n) * 0.1;
        let b = [-0.5, 0.3, -0.2, -0.4, 0.6, 0.1, 0.2, -0.3, 0.4];
        let mu = [0.8, 1.2, 0.5];
        let mut solver = ContactSolver::new(3);
        let (mut l, mut w) = ([0.0; 9], [0.0; 9]);
        solver.solve(&Settings::default(), g.as_view(), &b, &mu, None, &mut l, &mut w);
        solver.etry[..3].copy_from_slice(&[STICKING, SLIDING, SEPARATED]);
        solver.ey[..5].copy_from_slice(&Y);
        solver.mode_residual();
        solver
    }

    /// Column `c` of `jac` (`5 x cols`) against central differences of the mode residual in
    /// unknown `at[c]`.
    fn assert_matches_differences(solver: &mut ContactSolver, jac: &[f64], cols: usize, at: &[usize]) {
        let h = 1e-6;
        for (c, &yc) in at.iter().enumerate() {
            let mut f = [[0.0; 5]; 2];
            for (s, out) in [h, -h].iter().zip(f.iter_mut()) {
                solver.ey[..5].copy_from_slice(&Y);
                solver.ey[yc] += s;
                solver.mode_residual();
                out.copy_from_slice(&solver.ef[..5]);
            }
            for r in 0..5 {
                let fd = (f[0][r] - f[1][r]) / (2.0 * h);
                assert!((fd - jac[r * cols + c]).abs() < 1e-7, "({r}, {c}): {} vs {fd}", jac[r * cols + c]);
            }
        }
    }

    /// The Jacobian in every unknown (the polish's), inside the cones' offsets too.
    #[test]
    fn full_jacobian_matches_finite_differences() {
        let mut solver = three_modes(5, 7, 13);
        (solver.eslip, solver.esep[2]) = (1e-3, 0.02);
        solver.mode_residual();
        solver.full_jacobian(5);
        let jac = solver.ejac[..25].to_vec();
        assert_matches_differences(&mut solver, &jac, 5, &[0, 1, 2, 3, 4]);
    }

    /// The impulse Jacobian (the angle, `y[4]`, fixed).
    #[test]
    fn mode_jacobian_matches_finite_differences() {
        let mut solver = three_modes(7, 3, 11);
        assert_eq!(solver.mode_jacobian(5), 4);
        let jac = solver.ejac[..20].to_vec();
        assert_matches_differences(&mut solver, &jac, 4, &[0, 1, 2, 3]);
    }
}
