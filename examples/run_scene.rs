//! Runs one of the shared scenes (the same builders the tests, `avbd run` and `avbd bench`
//! use) with a parameter changed, and prints its metrics as it goes.
//!
//! ```sh
//! cargo run --release --example run_scene                    # pendulum, 50 links, 50,000:1
//! cargo run --release --example run_scene -- card_tower 600
//! ```

use bevy_avbd::SolverConfig;
use bevy_avbd::scenes::Scene;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "pendulum".into());
    let frames: u32 = args.next().map(|f| f.parse()).transpose()?.unwrap_or(300);
    let params = if name == "pendulum" {
        vec![
            ("links".to_string(), 50.0),
            ("mass_ratio".to_string(), 50_000.0),
        ]
    } else {
        Vec::new()
    };
    let mut scene = Scene::build(&name, &params, SolverConfig::default())?;
    for frame in 1..=frames {
        scene.step()?;
        if frame % 100 == 0 || frame == frames {
            let metrics: Vec<String> = scene
                .metrics()
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            println!("frame {frame}: {}", metrics.join(", "));
        }
    }
    Ok(())
}
