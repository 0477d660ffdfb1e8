use super::*;
use crate::config::SolverConfig;
use crate::scenes::Scene;

fn require_gpu() -> bool {
    std::env::var("AVBD_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The device's candidates against the CPU's at the end of frames of contact scenes:
/// the same pairs in the same order with the same lower bounds, bit for bit, with the
/// CPU's margins on lavapipe (a device that computes like the CPU).
#[test]
fn the_device_finds_the_cpus_candidates() {
    let gpu = match GpuContactBroadPhase::new() {
        Ok(g) => g,
        Err(e) => {
            assert!(!require_gpu(), "AVBD_REQUIRE_GPU=1 but no device: {e}");
            eprintln!("skipped: no device ({e})");
            return;
        }
    };
    type Case<'a> = (&'a str, &'a [(&'a str, f64)], &'a [u32]);
    let scenes: [Case; 4] = [
        ("cloth_drape", &[], &[1, 20, 45]),
        ("squishy_balls", &[("count", 8.0)], &[1, 12]),
        ("mattress", &[], &[1, 30]),
        ("soft_on_chain", &[], &[1, 10]),
    ];
    let (mut checked, mut found) = (0, 0);
    for (name, overrides, frames) in scenes {
        let overrides: Vec<(String, f64)> =
            overrides.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        let mut scene = Scene::build(name, &overrides, SolverConfig::default()).unwrap();
        let mut frame = 0;
        for &at in frames {
            while frame < at {
                scene.step().unwrap();
                frame += 1;
            }
            let world = &scene.world;
            let contact = &world.solver.vertices.contact;
            let cfg = &world.config;
            // Every other check starts from room for too few pairs: the runs again with
            // room for all of them.
            if checked % 2 == 0 {
                gpu.kept.lock().unwrap().1 = 1;
            }
            checked += 1;
            let mut input = Input::new(contact, cfg, &world.deformables.owner);
            let counted = input.placed;
            // Every other check starts short of room for the grid's entries too (before
            // any run of this input, so the kept entries are another input's).
            if checked % 2 == 1 {
                input.placed = 1;
            }
            let (pairs, lower, token) = gpu.find(input, &CcdMargins::CPU).unwrap();
            // The records the step copies are those the host would upload.
            let records = read_pairs(&gpu, token, pairs.len());
            let packed: Vec<[u32; 3]> = pairs
                .iter()
                .zip(&lower)
                .map(|(p, l)| crate::gpu::soft_contact::candidate_record(p, *l))
                .collect();
            assert_eq!(records, packed, "{name}, frame {at}: the device's records");
            // The host counts the grid's entries as the device places them.
            let mut input = Input::new(contact, cfg, &world.deformables.owner);
            input.params.capacity = 1024;
            input.params.entry_capacity = counted.max(1024);
            let (_, [_, placed]) = gpu.run(&input, &CcdMargins::CPU).unwrap();
            assert_eq!(placed, counted, "{name}, frame {at}: grid entries");
            let planes = contact.plane_pairs(cfg);
            let cpu: Vec<Pair> = contact
                .candidates
                .iter()
                .copied()
                .filter(|p| p.kind != PairKind::PointPlane)
                .collect();
            let first_difference = pairs.iter().zip(&cpu).position(|(a, b)| a != b);
            assert_eq!(first_difference, None, "{name}, frame {at}: pairs differ");
            assert_eq!(pairs.len(), cpu.len(), "{name}, frame {at}: pair count");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&lower),
                bits(&contact.candidate_lower[..cpu.len()]),
                "{name}, frame {at}: lower bounds"
            );
            assert_eq!(
                planes,
                contact.candidates[cpu.len()..],
                "{name}, frame {at}: half-space pairs"
            );
            found += pairs.len();
        }
    }
    assert!(found > 10_000, "the scenes have candidates: {found}");
}

/// The first `n` pair records of run `token`, read from the device.
fn read_pairs(gpu: &GpuContactBroadPhase, token: u64, n: usize) -> Vec<[u32; 3]> {
    let pairs = gpu.records_of(token).expect("no run since").pairs;
    let bytes = (n as u64 * PAIR_BYTES).max(4);
    let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("pair records"),
        size: bytes.next_multiple_of(4),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(&pairs, 0, &staging, 0, bytes);
    gpu.queue.submit([encoder.finish()]);
    let words: Vec<u32> = crate::gpu::device::read_staging(&gpu.device, &staging).unwrap();
    words[..3 * n]
        .chunks_exact(3)
        .map(|c| [c[0], c[1], c[2]])
        .collect()
}
