// The warm start's penalties (Eq. 19), shared by the contacts' (contact_warm.wgsl) and
// the joints' (joints.wgsl): SolverConfig::initial_penalty, warm_penalty and load_floor.
// For modules whose `params` is common.wgsl's Params.

fn initial_penalty(mass: f32) -> f32 {
    return min(max(params.new_row_mass_ratio * mass / (params.dt * params.dt), params.k_start), params.k_max);
}

fn warm_penalty(k_prev: f32, floor: f32) -> f32 {
    return min(max(max(params.gamma * k_prev, params.k_start), floor), params.k_max);
}

fn load_floor(lambda: f32, error_scale: f32, mass: f32) -> f32 {
    return min(min(abs(lambda) / error_scale, params.floor_mass_ratio * mass / (params.dt * params.dt)), params.k_max);
}
