//! Every text the model reads in an attachment message, in one place so it can be reviewed.
//!
//! Each line starts with the `[attachment: URL]` marker the model already knows from tool
//! results (OUT-3), says what was not provided and why (which limit, with its value), and what
//! the model can do instead.

use crate::config::AttachmentConfig;

/// Why a record's bytes are not in this request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Terminal: effective image input is off (PRJ-9, PRJ-12).
    ImageInputOff,
    /// Terminal: the model does not accept audio.
    AudioInputOff,
    /// Terminal: neither an image nor audio.
    UnsupportedType,
    /// Terminal: the resolver found the type or encoding unsupported (PRJ-9).
    Unsupported(String),
    /// Terminal: inbound media was never stored (RES-9).
    NotDownloaded(String),
    /// Terminal: the provider refused a request because of it.
    Rejected(String),
    /// Terminal: the stored media was deleted (retention).
    Deleted(String),
    /// Terminal: the image alone is over `maxImageBytes`.
    OverImageBytes,
    /// Terminal: the image alone is over `maxTotalImageBytes`.
    OverTotalBytes,
    /// Terminal: a side is over `maxImageDimension`.
    OverDimension { width: u32, height: u32 },
    /// Terminal: the image alone is over a limit of the model's provider.
    OverProvider(ProviderLimit),
    /// Non-terminal: not readable now (PRJ-10).
    Unavailable(String),
    /// Non-terminal: the request's image budget is taken (PRJ-8, PRJ-10).
    NoCapacity(Shortfall),
}

/// Which part of the request budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shortfall {
    /// All `maxImageCount` slots are taken.
    Count,
    /// Fewer bytes than the image needs are left of `maxTotalImageBytes`.
    Bytes { left: u64 },
    /// Less base64 than the image needs is left of the provider's request limit.
    RequestBytes { left: u64 },
    /// The image is over the provider's many-images side limit and the request already holds
    /// as many images as that rule allows.
    ManyImages,
}

/// A provider limit one image alone is over (see [`crate::ImageLimits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProviderLimit {
    /// Its base64 is over the per-image limit.
    ImageBytes { max: u64 },
    /// Its base64 is over the limit for all images of one request.
    RequestBytes { max: u64 },
    /// A side is over the per-image pixel limit.
    Dimension { width: u32, height: u32, max: u32 },
}

impl Reason {
    /// Terminal reasons are stated once and then the record is done (PRJ-9).
    pub(crate) fn is_terminal(&self) -> bool {
        !matches!(self, Reason::Unavailable(_) | Reason::NoCapacity(_))
    }
}

/// The label line that precedes embedded bytes.
pub(crate) fn label(url: &str) -> String {
    format!("[attachment: {url}]")
}

/// The line that replaces bytes that are not provided.
pub(crate) fn reason_text(
    reason: &Reason,
    url: &str,
    media_type: &str,
    bytes: u64,
    config: &AttachmentConfig,
) -> String {
    let head = label(url);
    let vision = config.vision_model.is_some();
    match reason {
        Reason::ImageInputOff => {
            let ask = if vision {
                format!(
                    " To ask the vision model about it, read `{}`.",
                    question_url(url)
                )
            } else {
                String::new()
            };
            format!(
                "{head} visual content not provided: image input is off for this model. \
                 Read the URL for a description and metadata.{ask}"
            )
        }
        Reason::AudioInputOff => {
            format!(
                "{head} audio not provided: this model does not accept audio input ({media_type})."
            )
        }
        Reason::UnsupportedType => format!(
            "{head} not provided: this model does not accept {media_type} attachments. \
             Tools can still read the URL."
        ),
        Reason::Unsupported(why) => {
            format!("{head} not provided: {media_type} cannot be used ({why}).")
        }
        Reason::NotDownloaded(why) => {
            format!("{head} not provided: the media was not downloaded ({why}).")
        }
        Reason::Deleted(why) => {
            format!("{head} not provided: it was deleted when {why}, and cannot be shown again.")
        }
        Reason::Rejected(why) => format!(
            "{head} not provided: the provider refused the request that carried it ({why}).{}",
            instead(url, vision)
        ),
        Reason::OverImageBytes => {
            let (size, limit) = sizes(bytes, config.max_image_bytes);
            format!(
                "{head} image not provided: its size {size} is over maxImageBytes ({limit}); \
                 images are never resized.{}",
                instead(url, vision)
            )
        }
        Reason::OverTotalBytes => {
            let (size, limit) = sizes(bytes, config.max_total_image_bytes);
            format!(
                "{head} image not provided: its size {size} is over maxTotalImageBytes ({limit}), \
                 the limit for all images of one request; images are never resized.{}",
                instead(url, vision)
            )
        }
        Reason::OverDimension { width, height } => format!(
            "{head} image not provided: its {width}x{height} pixels are over maxImageDimension \
             ({} px per side); images are never resized.{}",
            config.max_image_dimension,
            instead(url, vision)
        ),
        Reason::OverProvider(limit) => {
            let who = config.provider_limits.who();
            let what = match *limit {
                ProviderLimit::ImageBytes { max } => {
                    let (encoded, max) = sizes(crate::encoded_len(bytes), max);
                    format!(
                        "its size {} ({encoded} as base64) is over the {who} limit of {max} of \
                         base64 per image",
                        human(bytes)
                    )
                }
                ProviderLimit::RequestBytes { max } => {
                    let (encoded, max) = sizes(crate::encoded_len(bytes), max);
                    format!(
                        "its size {} ({encoded} as base64) is over the {who} limit of {max} of \
                         base64 for all images of one request",
                        human(bytes)
                    )
                }
                ProviderLimit::Dimension { width, height, max } => format!(
                    "its {width}x{height} pixels are over the {who} limit of {max} px per side"
                ),
            };
            format!(
                "{head} image not provided: {what}; images are never resized.{}",
                instead(url, vision)
            )
        }
        Reason::Unavailable(why) => format!(
            "{head} not provided in this request: it could not be read ({why}). \
             It will be tried again in the next request."
        ),
        Reason::NoCapacity(Shortfall::Count) => match config.provider_limits.images {
            Some(n) if n < config.max_image_count => format!(
                "{head} image not provided in this request: its image slots (the {} limit of {n} \
                 images per request) are all taken. It will follow in a later request.",
                config.provider_limits.who()
            ),
            _ => format!(
                "{head} image not provided in this request: its image slots (maxImageCount {}) \
                 are all taken. It will follow in a later request.",
                config.max_image_count
            ),
        },
        Reason::NoCapacity(Shortfall::RequestBytes { left }) => {
            let limits = &config.provider_limits;
            format!(
                "{head} image not provided in this request: it needs {} of base64 and only {} of \
                 the {} limit of {} per request is left. It will follow in a later request.",
                human(crate::encoded_len(bytes)),
                human(*left),
                limits.who(),
                human(limits.request_bytes.unwrap_or(u64::MAX))
            )
        }
        Reason::NoCapacity(Shortfall::ManyImages) => {
            let limits = &config.provider_limits;
            let (above, side) = limits.many().unwrap_or((0, 0));
            format!(
                "{head} image not provided in this request: {} accepts images over {side} px per \
                 side only in requests with at most {above} images, and this request is full. \
                 It will follow in a later request.",
                limits.who()
            )
        }
        Reason::NoCapacity(Shortfall::Bytes { left }) => {
            let (size, left) = sizes(bytes, *left);
            format!(
                "{head} image not provided in this request: it needs {size} and only {left} of \
                 maxTotalImageBytes ({}) is left. It will follow in a later request.",
                human(config.max_total_image_bytes)
            )
        }
    }
}

/// What the model can do about an image it will never see embedded.
fn instead(url: &str, vision: bool) -> String {
    if vision {
        format!(
            " To ask the vision model about it, read `{}`.",
            question_url(url)
        )
    } else {
        " Tools can still read the URL.".to_owned()
    }
}

/// The URL with a `question` parameter added, as `read` expects it (VIS-1).
fn question_url(url: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}question=<your question>")
}

/// Two sizes in human units; exact bytes when rounding would make them look equal.
fn sizes(a: u64, b: u64) -> (String, String) {
    let (ha, hb) = (human(a), human(b));
    if ha == hb && a != b {
        (format!("{a} bytes"), format!("{b} bytes"))
    } else {
        (ha, hb)
    }
}

/// A size in bytes, KiB or MiB with at most one decimal.
pub(crate) fn human(bytes: u64) -> String {
    const KIB: u128 = 1024;
    const MIB: u128 = 1024 * 1024;
    let b = u128::from(bytes);
    let (unit, name) = if b < KIB {
        return format!("{bytes} bytes");
    } else if b < MIB {
        (KIB, "KiB")
    } else {
        (MIB, "MiB")
    };
    // Integer rounding to tenths, so the text is identical on every platform.
    let tenths = (b * 10 + unit / 2) / unit;
    if tenths % 10 == 0 {
        format!("{} {name}", tenths / 10)
    } else {
        format!("{}.{} {name}", tenths / 10, tenths % 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ImageLimits;

    /// Every text of this module with sample values, as `TEXTS.md` (the crate docs' `texts`
    /// page) shows them.
    fn catalogue() -> String {
        let url = "asset://0190a5e2-7c1d-7000-8000-000000000001";
        let plain = AttachmentConfig::default();
        let vision = AttachmentConfig {
            vision_model: Some("describer".into()),
            ..AttachmentConfig::default()
        };
        let anthropic = AttachmentConfig {
            provider_limits: ImageLimits::anthropic(),
            ..AttachmentConfig::default()
        };
        let big = 6_400_000;
        let limits = ImageLimits::anthropic();
        let per_image = limits.image_bytes.unwrap_or(5_000_000);
        let per_request = limits.request_bytes.unwrap_or(32_000_000);
        let cases: Vec<(&str, Reason, u64, &AttachmentConfig)> = vec![
            ("image input off", Reason::ImageInputOff, big, &plain),
            (
                "image input off, vision model set",
                Reason::ImageInputOff,
                big,
                &vision,
            ),
            ("audio input off", Reason::AudioInputOff, 48_000, &plain),
            ("unsupported type", Reason::UnsupportedType, 48_000, &plain),
            (
                "unsupported by the resolver",
                Reason::Unsupported("the image is broken and cannot be decoded".into()),
                big,
                &plain,
            ),
            (
                "never downloaded",
                Reason::NotDownloaded("the platform gave no bytes".into()),
                big,
                &plain,
            ),
            (
                "deleted by retention",
                Reason::Deleted(
                    "its retention period (assets.cleanup.retentionDays: 30) ended".into(),
                ),
                big,
                &plain,
            ),
            (
                "refused by the provider",
                Reason::Rejected("image exceeds 5 MB maximum".into()),
                big,
                &plain,
            ),
            ("over maxImageBytes", Reason::OverImageBytes, big, &plain),
            (
                "over maxImageBytes, vision model set",
                Reason::OverImageBytes,
                big,
                &vision,
            ),
            (
                "over maxTotalImageBytes",
                Reason::OverTotalBytes,
                12_000_000,
                &plain,
            ),
            (
                "over maxImageDimension",
                Reason::OverDimension {
                    width: 4000,
                    height: 3000,
                },
                big,
                &plain,
            ),
            (
                "over the provider's base64 per image",
                Reason::OverProvider(ProviderLimit::ImageBytes { max: per_image }),
                big,
                &anthropic,
            ),
            (
                "over the provider's base64 per request",
                Reason::OverProvider(ProviderLimit::RequestBytes { max: per_request }),
                30_000_000,
                &anthropic,
            ),
            (
                "over the provider's pixels per side",
                Reason::OverProvider(ProviderLimit::Dimension {
                    width: 9000,
                    height: 200,
                    max: 8000,
                }),
                big,
                &anthropic,
            ),
            (
                "unreadable now",
                Reason::Unavailable("the object store did not answer".into()),
                big,
                &plain,
            ),
            (
                "no image slot left",
                Reason::NoCapacity(Shortfall::Count),
                big,
                &plain,
            ),
            (
                "no byte budget left",
                Reason::NoCapacity(Shortfall::Bytes { left: 3_000_000 }),
                big,
                &plain,
            ),
            (
                "no provider request budget left",
                Reason::NoCapacity(Shortfall::RequestBytes { left: 1_000_000 }),
                big,
                &anthropic,
            ),
            (
                "many-images rule",
                Reason::NoCapacity(Shortfall::ManyImages),
                big,
                &anthropic,
            ),
        ];
        let mut out = String::from(
            "Every text an attachment message can carry, with sample values (generated by the \
             `texts_page_lists_every_text` test from the code that writes them).\n\n\
             The bytes of an embedded attachment follow its label:\n\n",
        );
        out.push_str(&format!(
            "```text\n{}\n```\n\nBytes that are not provided are replaced by one line:\n\n",
            label(url)
        ));
        for (name, reason, bytes, config) in cases {
            let kind = if reason.is_terminal() {
                "stated once"
            } else {
                "every request until it is sent"
            };
            let media_type = match reason {
                Reason::AudioInputOff => "audio/mpeg",
                Reason::UnsupportedType => "application/pdf",
                _ => "image/png",
            };
            let text = reason_text(&reason, url, media_type, bytes, config);
            out.push_str(&format!(
                "- {name} ({kind}):\n\n  ```text\n  {text}\n  ```\n\n"
            ));
        }
        out
    }

    /// The crate docs show what the model reads; this keeps that page true. After a wording
    /// change, review the diff and rewrite the page with `UPDATE_TEXTS=1`.
    #[test]
    fn texts_page_lists_every_text() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/TEXTS.md");
        let expected = catalogue();
        if std::env::var_os("UPDATE_TEXTS").is_some() {
            std::fs::write(path, &expected).expect("write TEXTS.md");
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == expected,
            "TEXTS.md is stale; review, then run `UPDATE_TEXTS=1 cargo test -p ishiki-projection`:\n{expected}"
        );
    }

    #[test]
    fn human_sizes_round_to_tenths() {
        assert_eq!(human(0), "0 bytes");
        assert_eq!(human(1023), "1023 bytes");
        assert_eq!(human(1024), "1 KiB");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(5_242_880), "5 MiB");
        assert_eq!(human(6_400_000), "6.1 MiB");
        assert_eq!(human(u64::MAX), "17592186044416 MiB");
    }

    #[test]
    fn sizes_fall_back_to_bytes_when_rounding_hides_the_difference() {
        assert_eq!(
            sizes(5_242_881, 5_242_880),
            ("5242881 bytes".to_owned(), "5242880 bytes".to_owned())
        );
    }

    #[test]
    fn question_url_respects_an_existing_query() {
        assert_eq!(
            question_url("asset://a"),
            "asset://a?question=<your question>"
        );
        assert_eq!(
            question_url("asset://a?x=1"),
            "asset://a?x=1&question=<your question>"
        );
    }
}
