//! `step` allocates nothing once its workspace exists (STYLE habit 1).

use contactlab::scene::Scene;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

struct Counting;
static COUNT: AtomicUsize = AtomicUsize::new(0);
static ARMED: AtomicBool = AtomicBool::new(false);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.load(Ordering::Relaxed) {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn stepping_allocates_nothing() {
    for name in ["quadruped_pull.ron", "box_toss.ron", "hopper_drop.ron"] {
        let s = Scene::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes").join(name)).unwrap();
        let mut sim = s.simulation();
        sim.step();
        ARMED.store(true, Ordering::SeqCst);
        for _ in 0..700 {
            sim.step();
        }
        ARMED.store(false, Ordering::SeqCst);
        assert_eq!(COUNT.swap(0, Ordering::SeqCst), 0, "{name}: step allocated");
    }
}
