//! The Vulkan driver's own GDeflate decoder, and the choice between it and
//! the WGSL one.
//!
//! A Vulkan driver that offers `VK_EXT_memory_decompression` (or its NVIDIA
//! forerunner `VK_NV_memory_decompression`) decodes GDeflate 1.0 pages
//! itself with `vkCmdDecompressMemoryEXT`/`NV`: the same page bytes a pack
//! stores, so nothing is re-encoded. gpustream uses it where:
//! - the application asked for it ([`GDeflateDecoderPreference::Driver`],
//!   or `GPUSTREAM_GDEFLATE_DECODER=driver`);
//! - the device runs on wgpu's Vulkan backend;
//! - the device was opened with the extension enabled, which
//!   [`request_device`] does (wgpu itself never enables it).
//!
//! Everywhere else, and by default, the WGSL decoder
//! (`shaders/gdeflate_decode.wgsl`) runs. It is the default because it
//! measured faster: on an NVIDIA H100 (driver 580, `VK_NV_memory_decompression`)
//! the driver's decoder gave 3.4 GB/s on 4,096 pages against the WGSL
//! decoder's 4.4, and end to end 0.75 GB/s against 2.7 (docs/results.md).
//!
//! **What the driver's decoder does not do:** it reports nothing per page.
//! A damaged page still fails its block (the crc32c pass runs first), and
//! every page is given a whole 64 KiB output slot and declared to decode to
//! 64 KiB, the most a valid GDeflate 1.0 page holds. But a page whose
//! checksum matches and whose bits are not valid GDeflate (a crafted pack,
//! not a damaged one) is outside what the extension defines: a valid page
//! never writes past its slot, but for such a page only the driver knows.
//! The WGSL decoder flags such pages and writes nothing outside the block's
//! destination; force it (`GPUSTREAM_GDEFLATE_DECODER=wgsl`) for packs from
//! people you do not trust.
//!
//! A device the application opened itself counts as having the decoder
//! when the extension is enabled on it; it must then also have the
//! `memoryDecompression` and `bufferDeviceAddress` features enabled, as
//! [`request_device`] does.

use std::fmt;

#[cfg(target_os = "linux")]
mod vulkan;
#[cfg(target_os = "linux")]
pub use vulkan::{
    enabled_extension, offered_extension, offered_for_device, request_device, DriverBuffer,
    DriverGDeflate,
};

#[cfg(not(target_os = "linux"))]
mod elsewhere;
#[cfg(not(target_os = "linux"))]
pub use elsewhere::{
    enabled_extension, offered_extension, offered_for_device, request_device, DriverBuffer,
    DriverGDeflate,
};

/// Why [`request_device`] could not open a device. The driver variant
/// arises only where the driver decoder exists (Vulkan on Linux).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceOpenError {
    /// wgpu refused the descriptor.
    #[error("wgpu refused the device: {0}")]
    Wgpu(#[from] wgpu::RequestDeviceError),
    /// The Vulkan driver refused a device with the extension enabled.
    #[error("the Vulkan driver refused a device with {extension} enabled: {error}")]
    Vulkan {
        /// The extension asked for.
        extension: &'static str,
        /// The driver's answer.
        error: String,
    },
}

/// The Vulkan extensions through which a driver decodes GDeflate pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverExtension {
    /// `VK_EXT_memory_decompression` (ratified in 2025; needs
    /// `VK_KHR_maintenance5` for its buffer usage flag).
    Ext,
    /// `VK_NV_memory_decompression` (NVIDIA, since 2022).
    Nv,
}

impl DriverExtension {
    /// Both, in the order gpustream prefers them.
    pub const ALL: [DriverExtension; 2] = [DriverExtension::Ext, DriverExtension::Nv];

    /// The extension's name as Vulkan spells it.
    pub fn name(self) -> &'static str {
        match self {
            DriverExtension::Ext => "VK_EXT_memory_decompression",
            DriverExtension::Nv => "VK_NV_memory_decompression",
        }
    }
}

/// Which GDeflate decoder the application wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GDeflateDecoderPreference {
    /// The WGSL decoder: it flags malformed pages, and on the one driver
    /// measured with a decoder of its own (NVIDIA 580 on an H100) it was
    /// the faster of the two.
    #[default]
    Wgsl,
    /// The driver's decoder where the device has it enabled, else WGSL.
    Driver,
}

impl GDeflateDecoderPreference {
    /// Parses `wgsl` or `driver` (any case).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "wgsl" => Ok(Self::Wgsl),
            "driver" => Ok(Self::Driver),
            other => Err(format!(
                "unknown GDeflate decoder {other:?}: expected wgsl or driver"
            )),
        }
    }
}

/// The GDeflate decoder a device runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GDeflateDecoderKind {
    /// `shaders/gdeflate_decode.wgsl`: one 32-lane workgroup a page.
    Wgsl,
    /// The driver's, through this extension.
    Driver(DriverExtension),
}

/// What a device offers for GDeflate, as [`choose`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverSupport {
    /// The device's backend.
    pub backend: wgpu::Backend,
    /// The extension the adapter's driver offers, if any
    /// ([`offered_extension`]).
    pub offered: Option<DriverExtension>,
    /// The extension the device was opened with, if any
    /// ([`enabled_extension`]).
    pub enabled: Option<DriverExtension>,
}

/// The decoder chosen and why, in words for reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GDeflateDecoderChoice {
    /// The decoder.
    pub kind: GDeflateDecoderKind,
    /// Why, e.g. "the driver offers neither VK_EXT_memory_decompression
    /// nor VK_NV_memory_decompression".
    pub reason: String,
}

impl fmt::Display for GDeflateDecoderChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            GDeflateDecoderKind::Wgsl => {
                write!(f, "WGSL (shaders/gdeflate_decode.wgsl): {}", self.reason)
            }
            GDeflateDecoderKind::Driver(e) => {
                write!(f, "the driver's, through {}: {}", e.name(), self.reason)
            }
        }
    }
}

/// Picks the GDeflate decoder for a device: the driver's where it is asked
/// for and the device has its extension enabled, else WGSL,
/// with the reason. `source` says where the preference came from
/// ("configured", "set by GPUSTREAM_GDEFLATE_DECODER").
pub fn choose(
    support: DriverSupport,
    preference: GDeflateDecoderPreference,
    source: &str,
) -> GDeflateDecoderChoice {
    let wgsl = |reason: String| GDeflateDecoderChoice {
        kind: GDeflateDecoderKind::Wgsl,
        reason,
    };
    if preference == GDeflateDecoderPreference::Wgsl {
        let also = match support.enabled.or(support.offered) {
            Some(e) => format!(" (the driver offers {})", e.name()),
            None => String::new(),
        };
        return wgsl(format!("preferred ({source}){also}"));
    }
    if support.backend != wgpu::Backend::Vulkan {
        return wgsl(format!(
            "the {} backend has no driver decoder (only Vulkan drivers offer one)",
            support.backend.to_str()
        ));
    }
    match (support.enabled, support.offered) {
        (Some(e), _) => GDeflateDecoderChoice {
            kind: GDeflateDecoderKind::Driver(e),
            reason: "the device was opened with it enabled".into(),
        },
        (None, Some(e)) => wgsl(format!(
            "the driver offers {} but the device was opened without it \
             (open it with gpustream::decode::gpu::driver_gdeflate::request_device)",
            e.name()
        )),
        (None, None) => wgsl(format!(
            "the driver offers neither {} nor {}",
            DriverExtension::Ext.name(),
            DriverExtension::Nv.name()
        )),
    }
}

/// What `device` offers, for [`choose`].
pub fn support(device: &wgpu::Device) -> DriverSupport {
    DriverSupport {
        backend: device.adapter_info().backend,
        offered: offered_for_device(device),
        enabled: enabled_extension(device),
    }
}

/// The most bytes one GDeflate 1.0 page decodes to, and the largest
/// `decompressedSize` the extensions take for it.
pub const MAX_PAGE_OUTPUT: u64 = 65536;

/// One page for the driver: `src_size` bytes at `src_offset` of the source
/// buffer decode to `dst_size` bytes at `dst_offset` of the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverRegion {
    /// Offset in the source buffer (multiple of 4).
    pub src_offset: u64,
    /// Bytes of the page (not zero).
    pub src_size: u64,
    /// Offset in the destination buffer (multiple of 4).
    pub dst_offset: u64,
    /// Bytes it decodes to: 1 to [`MAX_PAGE_OUTPUT`].
    pub dst_size: u64,
}

/// Why a batch of regions was not recorded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DriverRecordError {
    /// A region breaks one of the extension's rules or leaves its buffer.
    #[error("driver GDeflate region {index} ({region:?}) {why}")]
    BadRegion {
        /// Its index in the batch.
        index: usize,
        /// The region.
        region: DriverRegion,
        /// Which rule.
        why: &'static str,
    },
    /// wgpu did not lend the encoder's Vulkan command buffer.
    #[error("wgpu lent no Vulkan command buffer for the driver's decoder")]
    NoEncoder,
}

/// Checks `regions` against the rules the extensions set (4-byte aligned
/// addresses, sizes not zero, at most 64 KiB out) and against the sizes of
/// the buffers they address, so that what reaches the driver is valid use.
pub fn validate_regions(
    regions: &[DriverRegion],
    src_len: u64,
    dst_len: u64,
) -> Result<(), DriverRecordError> {
    for (index, r) in regions.iter().enumerate() {
        let why = if r.src_offset % 4 != 0 || r.dst_offset % 4 != 0 {
            Some("is not 4-byte aligned")
        } else if r.src_size == 0 || r.dst_size == 0 {
            Some("has a zero size")
        } else if r.dst_size > MAX_PAGE_OUTPUT {
            Some("decodes to more than 64 KiB")
        } else if r
            .src_offset
            .checked_add(r.src_size)
            .is_none_or(|e| e > src_len)
        {
            Some("reads past the source buffer")
        } else if r
            .dst_offset
            .checked_add(r.dst_size)
            .is_none_or(|e| e > dst_len)
        {
            Some("writes past the destination buffer")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(DriverRecordError::BadRegion {
                index,
                region: *r,
                why,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wgpu::Backend;
    use DriverExtension::{Ext, Nv};
    use GDeflateDecoderKind::{Driver, Wgsl};
    use GDeflateDecoderPreference::{Driver as Auto, Wgsl as ForceWgsl};

    fn on(
        backend: Backend,
        offered: Option<DriverExtension>,
        enabled: Option<DriverExtension>,
    ) -> DriverSupport {
        DriverSupport {
            backend,
            offered,
            enabled,
        }
    }

    #[test]
    fn the_driver_decodes_only_where_the_device_enabled_it_and_wgsl_is_not_forced() {
        let c = choose(
            on(Backend::Vulkan, Some(Ext), Some(Ext)),
            Auto,
            "configured",
        );
        assert_eq!(c.kind, Driver(Ext));
        let c = choose(on(Backend::Vulkan, Some(Nv), Some(Nv)), Auto, "configured");
        assert_eq!(c.kind, Driver(Nv));
        assert!(c
            .to_string()
            .starts_with("the driver's, through VK_NV_memory_decompression"));

        let c = choose(
            on(Backend::Vulkan, Some(Ext), Some(Ext)),
            ForceWgsl,
            "set by X",
        );
        assert_eq!(c.kind, Wgsl);
        assert_eq!(
            c.reason,
            "preferred (set by X) (the driver offers VK_EXT_memory_decompression)"
        );

        let c = choose(on(Backend::Vulkan, Some(Nv), None), Auto, "configured");
        assert_eq!(c.kind, Wgsl);
        assert!(c.reason.contains("opened without it"), "{}", c.reason);

        let c = choose(on(Backend::Vulkan, None, None), Auto, "configured");
        assert_eq!(c.kind, Wgsl);
        assert!(
            c.reason.starts_with("the driver offers neither"),
            "{}",
            c.reason
        );

        // A backend other than Vulkan never gets the driver's decoder, even
        // if a stale probe claimed an extension.
        for b in [Backend::Gl, Backend::Metal, Backend::Dx12, Backend::Noop] {
            let c = choose(on(b, Some(Ext), Some(Ext)), Auto, "configured");
            assert_eq!(c.kind, Wgsl, "{b:?}");
            assert!(
                c.reason.contains("backend has no driver decoder"),
                "{}",
                c.reason
            );
        }
    }

    #[test]
    fn preference_parses_and_rejects() {
        assert_eq!(GDeflateDecoderPreference::parse("WGSL"), Ok(ForceWgsl));
        assert_eq!(GDeflateDecoderPreference::parse(" driver "), Ok(Auto));
        let e = GDeflateDecoderPreference::parse("auto").unwrap_err();
        assert!(e.contains("expected wgsl or driver"), "{e}");
    }

    fn r(src_offset: u64, src_size: u64, dst_offset: u64, dst_size: u64) -> DriverRegion {
        DriverRegion {
            src_offset,
            src_size,
            dst_offset,
            dst_size,
        }
    }

    #[test]
    fn regions_are_checked_against_the_extension_rules_and_the_buffers() {
        assert_eq!(
            validate_regions(&[r(0, 10, 0, 65536), r(12, 4, 65536, 4)], 16, 65540),
            Ok(())
        );
        let why = |regions: &[DriverRegion]| match validate_regions(regions, 1024, 1 << 20) {
            Err(DriverRecordError::BadRegion { why, .. }) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(why(&[r(2, 4, 0, 4)]), "is not 4-byte aligned");
        assert_eq!(why(&[r(0, 4, 6, 4)]), "is not 4-byte aligned");
        assert_eq!(why(&[r(0, 0, 0, 4)]), "has a zero size");
        assert_eq!(why(&[r(0, 4, 0, 65540)]), "decodes to more than 64 KiB");
        assert_eq!(why(&[r(1020, 8, 0, 4)]), "reads past the source buffer");
        assert_eq!(
            why(&[r(0, 4, (1 << 20) - 4, 8)]),
            "writes past the destination buffer"
        );
        assert_eq!(
            why(&[r(u64::MAX - 3, 8, 0, 4)]),
            "reads past the source buffer"
        );
    }

    /// The driver path hands its pages' status words to the stored-copy
    /// pass, which writes LZ4 status codes; the completion stage reads them
    /// as GDeflate codes. The two codes it can write must mean the same.
    #[test]
    fn stored_copy_status_words_read_the_same_as_gdeflate_status_words() {
        use crate::decode::{GDeflateStatus, Lz4Status};
        assert_eq!(
            GDeflateStatus::from_word(Lz4Status::Ok.to_word()),
            GDeflateStatus::Ok
        );
        assert_eq!(
            GDeflateStatus::from_word(Lz4Status::BadDescriptor.to_word()),
            GDeflateStatus::BadDescriptor
        );
        assert_eq!(
            GDeflateStatus::from_word(Lz4Status::NotRun.to_word()),
            GDeflateStatus::NotRun
        );
    }
}
