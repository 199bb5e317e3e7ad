//! Every scene in `scenes/` loads and simulates to its end.

use contactlab::scene::Scene;
use std::path::Path;

#[test]
fn every_scene_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("ron") {
            continue;
        }
        let scene = Scene::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            scene.warnings.is_empty(),
            "{}: {:?}",
            path.display(),
            scene.warnings
        );
        n += 1;
    }
    assert!(n >= 5);
}
