//! The tray icon's looks, drawn from the app's tray glyph (`icons/tray.png`, an arched door)
//! when needed, so no extra image files have to be kept in step with it:
//!
//! - ready: the glyph;
//! - approvals waiting: the glyph with an amber badge at its top right (the count is the
//!   icon's title, next to it);
//! - locked: the glyph faded, with a padlock over its lower right;
//! - no engine: the glyph faded.

use postern_engine::GateStatus;
use postern_engine::authority::VaultState;

/// How the icon looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// No engine runs in this app (starting, unavailable, stopped).
    Idle,
    /// The vault is ready and nothing waits.
    Ready,
    /// Approval requests wait for a human.
    Waiting,
    /// The vault is locked (or the audit log is quarantined): no call runs.
    Locked,
}

impl Look {
    /// The look for the gate's state (`None`: no engine).
    pub fn of(gate: Option<&GateStatus>) -> Self {
        match gate {
            None => Self::Idle,
            Some(gate) => match gate.vault {
                VaultState::Ready if gate.approvals > 0 => Self::Waiting,
                VaultState::Ready => Self::Ready,
                VaultState::Locked | VaultState::Unlocking | VaultState::Quarantined => {
                    Self::Locked
                }
            },
        }
    }
}

/// The icon for `look`: light for Linux panels, black as a macOS template image.
pub fn image(look: Look, template: bool) -> Rgba {
    let base = if template {
        glyph(include_bytes!("../../../../icons/tray-template.png"))
    } else {
        glyph(include_bytes!("../../../../icons/tray.png"))
    };
    let Rgba {
        rgba,
        width,
        height,
    } = base;
    let mut canvas = Canvas {
        rgba,
        width,
        height,
    };
    // Shapes are laid out on a 64×64 grid and scaled to the glyph.
    let unit = width as f32 / 64.0;
    let ink = if template { [0, 0, 0, 255] } else { LIGHT };
    match look {
        Look::Ready => {}
        Look::Idle => canvas.fade(FADED),
        Look::Waiting => {
            let badge = |x: f32, y: f32, r: f32| within_circle(x / unit, y / unit, 51.0, 13.0, r);
            canvas.cut(|x, y| badge(x, y, 13.5));
            canvas.paint(|x, y| badge(x, y, 10.5), if template { ink } else { AMBER });
        }
        Look::Locked => {
            canvas.fade(FADED);
            // A padlock over the door's lower right: a body with a keyhole, under a shackle
            // (a half ring), cut clear of the faded glyph.
            let body = |x: f32, y: f32, grow: f32| {
                let r = 4.0 + grow;
                within_rounded_rect(
                    x,
                    y,
                    (34.0 - grow, 39.0 - grow),
                    (62.0 + grow, 63.0 + grow),
                    r,
                )
            };
            let from_shackle = |x: f32, y: f32| ((x - 48.0).powi(2) + (y - 39.0).powi(2)).sqrt();
            let keyhole = |x: f32, y: f32| {
                within_circle(x, y, 48.0, 49.0, 3.0)
                    || ((46.8..=49.2).contains(&x) && (49.0..=56.0).contains(&y))
            };
            canvas.cut(|x, y| {
                let (x, y) = (x / unit, y / unit);
                body(x, y, 3.0) || (y <= 39.0 && from_shackle(x, y) <= 13.0)
            });
            canvas.paint(
                |x, y| {
                    let (x, y) = (x / unit, y / unit);
                    let shackle = y <= 39.0 && (6.0..=10.0).contains(&from_shackle(x, y));
                    (body(x, y, 0.0) && !keyhole(x, y)) || shackle
                },
                ink,
            );
        }
    }
    Rgba {
        rgba: canvas.rgba,
        width,
        height,
    }
}

/// An image as 8-bit RGBA rows, top to bottom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgba {
    /// The pixels, four bytes each.
    pub rgba: Vec<u8>,
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
}

/// Decodes the tray glyph, an 8-bit RGBA PNG built into the binary (icons/make-icons.sh makes
/// it so; a test reads both).
fn glyph(png: &[u8]) -> Rgba {
    let decoder = png::Decoder::new(png);
    let mut reader = decoder
        .read_info()
        .expect("the built-in tray glyph is a PNG");
    let mut rgba = vec![0; reader.output_buffer_size()];
    let info = reader
        .next_frame(&mut rgba)
        .expect("the built-in tray glyph decodes");
    assert_eq!(
        (info.color_type, info.bit_depth),
        (png::ColorType::Rgba, png::BitDepth::Eight),
        "the tray glyph is 8-bit RGBA"
    );
    rgba.truncate(info.buffer_size());
    Rgba {
        rgba,
        width: info.width,
        height: info.height,
    }
}

/// The glyph's colour on Linux (icons/make-icons.sh).
const LIGHT: [u8; 4] = [0xe9, 0xee, 0xf8, 0xff];
/// The "approvals waiting" badge.
const AMBER: [u8; 4] = [0xf5, 0x9e, 0x0b, 0xff];
/// How much of the glyph's opacity is left when faded.
const FADED: f32 = 0.4;
/// Samples per pixel side, for smooth edges.
const SAMPLES: usize = 4;

struct Canvas {
    rgba: Vec<u8>,
    width: u32,
    height: u32,
}

impl Canvas {
    /// Multiplies every pixel's opacity by `keep`.
    fn fade(&mut self, keep: f32) {
        for px in self.rgba.chunks_exact_mut(4) {
            px[3] = (f32::from(px[3]) * keep).round() as u8;
        }
    }

    /// Erases what lies under `shape` (smooth edges).
    fn cut(&mut self, shape: impl Fn(f32, f32) -> bool) {
        self.each(shape, |px, cover| {
            px[3] = (f32::from(px[3]) * (1.0 - cover)).round() as u8;
        });
    }

    /// Paints `shape` in `color` over what is there (smooth edges).
    fn paint(&mut self, shape: impl Fn(f32, f32) -> bool, color: [u8; 4]) {
        self.each(shape, |px, cover| {
            let src_a = f32::from(color[3]) / 255.0 * cover;
            let dst_a = f32::from(px[3]) / 255.0;
            let out_a = src_a + dst_a * (1.0 - src_a);
            if out_a <= 0.0 {
                return;
            }
            for c in 0..3 {
                let blended = (f32::from(color[c]) * src_a
                    + f32::from(px[c]) * dst_a * (1.0 - src_a))
                    / out_a;
                px[c] = blended.round() as u8;
            }
            px[3] = (out_a * 255.0).round() as u8;
        });
    }

    /// Calls `apply` with each pixel `shape` covers and how much of it (0..=1].
    fn each(&mut self, shape: impl Fn(f32, f32) -> bool, apply: impl Fn(&mut [u8], f32)) {
        let step = 1.0 / SAMPLES as f32;
        for y in 0..self.height {
            for x in 0..self.width {
                let mut hits = 0;
                for sy in 0..SAMPLES {
                    for sx in 0..SAMPLES {
                        let px = x as f32 + (sx as f32 + 0.5) * step;
                        let py = y as f32 + (sy as f32 + 0.5) * step;
                        hits += usize::from(shape(px, py));
                    }
                }
                if hits > 0 {
                    let i = ((y * self.width + x) * 4) as usize;
                    apply(
                        &mut self.rgba[i..i + 4],
                        hits as f32 / (SAMPLES * SAMPLES) as f32,
                    );
                }
            }
        }
    }
}

fn within_circle(x: f32, y: f32, cx: f32, cy: f32, r: f32) -> bool {
    (x - cx).powi(2) + (y - cy).powi(2) <= r * r
}

/// Whether (x, y) lies in the rectangle from `(x0, y0)` to `(x1, y1)` with corners rounded by `r`.
fn within_rounded_rect(x: f32, y: f32, (x0, y0): (f32, f32), (x1, y1): (f32, f32), r: f32) -> bool {
    if x < x0 || x > x1 || y < y0 || y > y1 {
        return false;
    }
    // Distance from the rectangle shrunk by the radius.
    let dx = (x0 + r - x).max(x - (x1 - r)).max(0.0);
    let dy = (y0 + r - y).max(y - (y1 - r)).max(0.0);
    dx * dx + dy * dy <= r * r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::gate;

    fn pixel(image: &Rgba, x: u32, y: u32) -> [u8; 4] {
        let i = ((y * image.width + x) * 4) as usize;
        image.rgba[i..i + 4].try_into().unwrap()
    }

    #[test]
    fn each_state_has_its_look() {
        assert_eq!(Look::of(None), Look::Idle);
        assert_eq!(Look::of(Some(&gate(VaultState::Ready, 0))), Look::Ready);
        assert_eq!(Look::of(Some(&gate(VaultState::Ready, 3))), Look::Waiting);
        assert_eq!(Look::of(Some(&gate(VaultState::Locked, 3))), Look::Locked);
        assert_eq!(
            Look::of(Some(&gate(VaultState::Quarantined, 0))),
            Look::Locked
        );
    }

    #[test]
    fn the_looks_are_distinct_images_of_one_size() {
        for template in [false, true] {
            let looks = [Look::Idle, Look::Ready, Look::Waiting, Look::Locked];
            let images: Vec<_> = looks.iter().map(|l| image(*l, template)).collect();
            for (i, a) in images.iter().enumerate() {
                assert_eq!((a.width, a.height), (64, 64));
                assert_eq!(a.rgba.len(), 64 * 64 * 4);
                for b in &images[i + 1..] {
                    assert_ne!(a.rgba, b.rgba, "template {template}");
                }
            }
        }
    }

    #[test]
    fn waiting_wears_an_amber_badge_and_locked_a_padlock_over_a_faded_door() {
        let ready = image(Look::Ready, false);
        assert_eq!(pixel(&image(Look::Waiting, false), 51, 13), AMBER);
        let locked = image(Look::Locked, false);
        // The padlock's body, opaque in the glyph's colour, and its keyhole.
        assert_eq!(pixel(&locked, 40, 58), LIGHT);
        assert_eq!(pixel(&locked, 47, 53)[3], 0);
        // The arch's left post, faded.
        let post = pixel(&ready, 18, 40);
        assert_eq!(post[3], 255, "the glyph is opaque there");
        assert_eq!(pixel(&locked, 18, 40)[3], (255.0 * FADED).round() as u8);
    }
}
