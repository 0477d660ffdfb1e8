// The contact records' chunks, shared by the modules that read whole records (avbd.wgsl's
// solver, contact_warm.wgsl's warm start and store). The records are split in up to 8
// chunks of 1 << params.contact_shift records, each its own binding, so that no binding
// exceeds the adapter's storage binding size (128 MiB on lavapipe); a module that takes
// this file declares them as contacts0 .. contacts7 (of `Contact`, read or read_write).

fn load_record(i: u32) -> Contact {
    let j = i & ((1u << params.contact_shift) - 1u);
    switch (i >> params.contact_shift) {
        case 0u: { return contacts0[j]; }
        case 1u: { return contacts1[j]; }
        case 2u: { return contacts2[j]; }
        case 3u: { return contacts3[j]; }
        case 4u: { return contacts4[j]; }
        case 5u: { return contacts5[j]; }
        case 6u: { return contacts6[j]; }
        default: { return contacts7[j]; }
    }
}

// A record's first body (WORLD: an empty slot of a pair, whose other fields are stale and
// which every reader skips without reading them).
fn record_body_a(i: u32) -> u32 {
    let j = i & ((1u << params.contact_shift) - 1u);
    switch (i >> params.contact_shift) {
        case 0u: { return contacts0[j].body_a; }
        case 1u: { return contacts1[j].body_a; }
        case 2u: { return contacts2[j].body_a; }
        case 3u: { return contacts3[j].body_a; }
        case 4u: { return contacts4[j].body_a; }
        case 5u: { return contacts5[j].body_a; }
        case 6u: { return contacts6[j].body_a; }
        default: { return contacts7[j].body_a; }
    }
}
