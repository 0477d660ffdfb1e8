//! bevy_ecs layer (being written).
