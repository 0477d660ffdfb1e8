//! The text overlay: scene name and description, fps, physics ms per step, counts, and the
//! keys (H shows or hides them).

use bevy_internal::prelude::*;

use crate::scene::{Demo, SceneSet};

pub struct HudPlugin;

impl Plugin for HudPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(Startup, setup)
            .add_systems(Update, (update_status, toggle_help).after(SceneSet::Step));
    }
}

#[derive(Component)]
struct Status;

#[derive(Component)]
struct Help;

const HELP: &str = "1-9 / N / P: scene   R: restart   Space: pause   S: step\n\
    drag: orbit   right drag: pan   wheel, +/-: zoom   arrows: orbit\n\
    J: joints   H: this help   Esc: quit";

fn panel(top: Option<f32>, bottom: Option<f32>) -> (Node, BackgroundColor) {
    (
        Node {
            position_type: PositionType::Absolute,
            left: Val::Px(10.0),
            top: top.map_or(Val::Auto, Val::Px),
            bottom: bottom.map_or(Val::Auto, Val::Px),
            padding: UiRect::all(Val::Px(6.0)),
            ..default()
        },
        BackgroundColor(Color::srgba(0.0, 0.0, 0.0, 0.45)),
    )
}

fn setup(mut commands: Commands) {
    commands.spawn((
        Status,
        Text::new(""),
        TextFont::from_font_size(15.0),
        TextColor(Color::WHITE),
        panel(Some(10.0), None),
    ));
    commands.spawn((
        Help,
        Text::new(HELP),
        TextFont::from_font_size(13.0),
        TextColor(Color::srgb(0.92, 0.92, 0.92)),
        panel(None, Some(10.0)),
    ));
}

fn update_status(
    demo: Res<Demo>,
    time: Res<Time>,
    mut fps: Local<f32>,
    mut text: Query<&mut Text, With<Status>>,
) {
    let dt = time.delta_secs();
    if dt > 0.0 {
        *fps = if *fps == 0.0 {
            1.0 / dt
        } else {
            0.95 * *fps + 0.05 / dt
        };
    }
    let Ok(mut text) = text.single_mut() else {
        return;
    };
    let name = demo.name();
    let description = bevy_avbd::scenes::spec(name).map_or("", |s| s.description);
    let mut s = format!(
        "{}/{}  {name}: {description}\n",
        demo.index + 1,
        demo.list.len()
    );
    if let Some(scene) = &demo.scene {
        let w = &scene.world;
        s += &format!(
            "{:.0} fps   physics {:.1} ms/step   frame {}   {} bodies, {} joints, {} deformables",
            *fps,
            demo.mean_step_ms,
            scene.frame,
            w.body_count(),
            w.joint_count(),
            w.deformable_count(),
        );
        if demo.paused {
            s += "   PAUSED";
        }
    }
    if let Some(e) = &demo.error {
        s += &format!("\nerror: {e}");
    }
    text.0 = s;
}

fn toggle_help(
    keys: Res<ButtonInput<KeyCode>>,
    mut help: Query<&mut Visibility, With<Help>>,
    mut exit: MessageWriter<AppExit>,
) {
    if keys.just_pressed(KeyCode::KeyH) {
        for mut v in &mut help {
            *v = match *v {
                Visibility::Hidden => Visibility::Inherited,
                _ => Visibility::Hidden,
            };
        }
    }
    if keys.just_pressed(KeyCode::Escape) {
        exit.write(AppExit::Success);
    }
}
