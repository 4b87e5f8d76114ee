//! GDeflate pages through the driver's own decoder
//! (`decode::gpu::driver_gdeflate`), where the device has it.
//!
//! The driver reads pages by device address, 4-byte aligned, and writes
//! each page's bytes linearly; the batch input is a wgpu buffer with pages
//! at any byte offset, and its outputs are the scratch or destination
//! buffers, some with rows padded for texture copies. So a batch goes
//! through the driver in three steps, all on the GPU:
//! 1. **realign**: the stored-copy pass copies each page from the batch
//!    input to a 4-byte aligned slot of the driver's source buffer;
//! 2. **decode**: one `vkCmdDecompressMemory*` over every page, each into
//!    its own slot of the driver's destination buffer, in a command buffer
//!    of its own (wgpu does not let raw and wgpu commands share one);
//! 3. **lay out**: the stored-copy pass copies each page's declared size
//!    from its slot to where the WGSL decoder would have written it, rows
//!    padded where the destination needs it.
//!
//! The driver reports nothing per page, so a page's status word is the
//! lay-out pass's: a checksum failure still fails the block (the crc32c
//! pass runs as before); what a page that is not valid GDeflate becomes is
//! up to the driver (see `decode::gpu::driver_gdeflate`). Each page has a
//! 64 KiB slot and is declared to decode to 64 KiB, so the driver is never
//! told less than a valid page holds.
//! A batch whose pages do not fit the driver's buffers (64 KiB a page)
//! goes through the WGSL decoder instead, as do batches of a slot whose
//! driver buffers could not be allocated (they are made for the first
//! batch with GDeflate pages, about the batch input and output sizes
//! again).

use crate::decode::gpu::driver_gdeflate::{DriverBuffer, DriverGDeflate, DriverRegion};
use crate::decode::gpu::{BlockPass, PassBindings};
use crate::decode::BlockDesc;

use super::Recorded;
use super::{GpuBatcher, Res};

/// The driver's source and destination buffers of one batch's resources.
pub(crate) struct DriverRes {
    pub src: DriverBuffer,
    pub dst: DriverBuffer,
}

impl DriverRes {
    /// Buffers for a batch of at most `caps.input` bytes of pages and
    /// `caps.blocks` pages (each slot aligned to 4 bytes) decoding to at
    /// most `caps.output` bytes, each within one storage binding of
    /// `max_binding` bytes (the copy passes bind them whole; a batch that
    /// needs more goes to WGSL).
    pub fn new(
        driver: &DriverGDeflate,
        caps: super::BatchCaps,
        max_binding: u64,
    ) -> Result<DriverRes, String> {
        let cap = |bytes: u64| (bytes + 4 * caps.blocks).min(max_binding & !3);
        Ok(DriverRes {
            src: driver.buffer(cap(caps.input), "gpustream batch driver pages")?,
            dst: driver.buffer(cap(caps.output), "gpustream batch driver output")?,
        })
    }
}

/// One batch's pages laid out for the driver: `realign[i]` copies page `i`
/// into the source buffer, `regions[i]` decodes it into the destination
/// buffer, and `relayout[i]` copies its bytes to where `laid[i]` said.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DriverPlan {
    pub realign: Vec<BlockDesc>,
    pub regions: Vec<DriverRegion>,
    pub relayout: Vec<BlockDesc>,
}

/// Lays out `laid` (the batch's GDeflate descriptors, with the empty
/// entries that pad each target's run) for the driver's buffers of
/// `src_len` and `dst_len` bytes. Each page gets a whole 64 KiB output slot
/// and is declared to decode to 64 KiB: the most a GDeflate 1.0 page can
/// hold, so no valid page can exceed what the driver is told. `None` when
/// the pages do not fit, or one breaks the extension's size rules (empty,
/// or over a block's size in or out): such a batch goes to the WGSL
/// decoder, which flags what it must.
pub(crate) fn plan(laid: &[BlockDesc], src_len: u64, dst_len: u64) -> Option<DriverPlan> {
    use crate::decode::gpu::driver_gdeflate::MAX_PAGE_OUTPUT;
    let mut plan = DriverPlan {
        realign: Vec::with_capacity(laid.len()),
        regions: Vec::with_capacity(laid.len()),
        relayout: Vec::with_capacity(laid.len()),
    };
    let (mut src, mut dst) = (0u64, 0u64);
    for d in laid {
        if *d == BlockDesc::linear(0, 0, 0, 0) {
            // Padding between targets' runs: nothing to decode; the copy
            // passes see an empty descriptor, as the WGSL decoder would.
            plan.realign.push(*d);
            plan.relayout.push(*d);
            continue;
        }
        let (page, out) = (u64::from(d.src_size), u64::from(d.dst_size));
        // The realign pass copies at most a block's size (a page larger
        // than that is refused by it, and must not be laid out as decoded).
        let block = crate::MAX_BLOCK_SIZE as u64;
        if page == 0 || page > block || out == 0 || out > MAX_PAGE_OUTPUT {
            return None;
        }
        if src + page > src_len || dst + MAX_PAGE_OUTPUT > dst_len {
            return None;
        }
        plan.realign.push(BlockDesc::linear(
            d.src_offset,
            d.src_size,
            src as u32,
            d.src_size,
        ));
        plan.regions.push(DriverRegion {
            src_offset: src,
            src_size: page,
            dst_offset: dst,
            dst_size: MAX_PAGE_OUTPUT,
        });
        plan.relayout.push(BlockDesc {
            src_offset: dst as u32,
            src_size: d.dst_size,
            ..*d
        });
        src = (src + page).next_multiple_of(4);
        dst += MAX_PAGE_OUTPUT;
    }
    Some(plan)
}

/// Where the lay-out descriptors start in the GDeflate table: after the
/// realign ones, on a run boundary, so that every run of them binds at an
/// offset the device's storage alignment allows (as the batch's own runs
/// do).
pub(crate) fn relayout_base(n: usize) -> usize {
    n.next_multiple_of(super::super::batch_tables::RUN_ALIGN)
}

/// What became of a batch's GDeflate pages at the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DriverOutcome {
    /// Not offered to it: the WGSL decoder takes them.
    NotUsed,
    /// Decoded: the lay-out passes copy them on.
    Decoded,
    /// Refused: they fail as not run.
    Failed,
}

impl GpuBatcher {
    /// `res`'s driver buffers, made on first use where the driver decodes;
    /// `None` where it does not or they could not be made.
    pub(super) fn driver_buffers<'r>(&self, res: &'r Res) -> Option<&'r DriverRes> {
        let driver = self.driver.as_ref()?;
        res.driver
            .get_or_init(|| {
                let max_binding = self.device.limits().max_storage_buffer_binding_size;
                DriverRes::new(driver, self.caps, max_binding).ok()
            })
            .as_ref()
    }

    /// Steps 1 and 2 for `plan`: uploads the realign descriptors at the
    /// start of the GDeflate table and the lay-out ones at
    /// [`relayout_base`], records the realign pass into `enc`, then moves
    /// `enc`'s commands and the driver's decode into `rec.before` and
    /// leaves `enc` a fresh encoder for step 3 and the rest of the batch.
    ///
    /// The realign pass writes its status words into the batch's spare
    /// status buffer (the un-conditioning pass's, which nothing reads): the
    /// pages' own status words are written by the lay-out pass alone, so a
    /// page whose lay-out never ran fails as not run. When the realign pass
    /// cannot be recorded the WGSL decoder takes the batch (`NotUsed`, the
    /// table's start re-uploaded); when the driver refuses the regions
    /// (only a wgpu that lends no Vulkan encoder would) the pages fail as
    /// not run (`Failed`).
    pub(super) fn record_driver_decode(
        &self,
        enc: &mut wgpu::CommandEncoder,
        res: &Res,
        input: wgpu::BufferSlice<'_>,
        laid: &[BlockDesc],
        plan: &DriverPlan,
        rec: &mut Recorded,
    ) -> DriverOutcome {
        let (Some(driver), Some(bufs)) = (&self.driver, res.driver.get().and_then(Option::as_ref))
        else {
            return DriverOutcome::NotUsed;
        };
        let n = plan.realign.len() as u64;
        let base = relayout_base(plan.realign.len()) as u64;
        let desc = std::mem::size_of::<BlockDesc>() as u64;
        self.queue
            .write_buffer(&res.gdeflate_descs, 0, bytemuck::cast_slice(&plan.realign));
        self.queue.write_buffer(
            &res.gdeflate_descs,
            base * desc,
            bytemuck::cast_slice(&plan.relayout),
        );
        let realign = PassBindings {
            input,
            descs: res.gdeflate_descs.slice(..n * desc),
            output: bufs.src.buffer.slice(..),
            status: res.uncond_status.slice(..n * 4),
        };
        if self
            .stored
            .encode_in(&self.device, enc, realign, n as u32, None)
            .is_err()
        {
            // Queue writes land in call order: the WGSL decoder's
            // descriptors replace the driver's before the batch runs.
            self.queue
                .write_buffer(&res.gdeflate_descs, 0, bytemuck::cast_slice(laid));
            return DriverOutcome::NotUsed;
        }
        rec.copy_passes += 1;
        let fresh = || {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("gpustream batch"),
                })
        };
        match driver.record(&bufs.src, &bufs.dst, &plan.regions) {
            Ok(decode) => {
                let first = std::mem::replace(enc, fresh());
                rec.before.push(first.finish());
                rec.before.push(decode);
                rec.driver_pages += plan.regions.len() as u64;
                rec.commands += 1;
                DriverOutcome::Decoded
            }
            Err(_) => DriverOutcome::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::gpu::driver_gdeflate::validate_regions;

    fn page(
        src_offset: u32,
        src_size: u32,
        dst_offset: u32,
        dst_size: u32,
        rows: (u32, u32),
    ) -> BlockDesc {
        BlockDesc {
            row_bytes: rows.0,
            row_pitch: rows.1,
            ..BlockDesc::linear(src_offset, src_size, dst_offset, dst_size)
        }
    }

    #[test]
    fn pages_get_aligned_slots_and_keep_their_destinations() {
        // Pages at odd input offsets, one with padded rows.
        let laid = [
            page(3, 1001, 0, 65536, (0, 0)),
            page(1004, 7, 65536, 12, (0, 0)),
            page(1011, 500, 131072, 4096, (64, 256)),
        ];
        let p = plan(&laid, 1 << 20, 1 << 20).expect("fits");
        assert_eq!(validate_regions(&p.regions, 1 << 20, 1 << 20), Ok(()));
        let src: Vec<u64> = p.regions.iter().map(|r| r.src_offset).collect();
        let dst: Vec<u64> = p.regions.iter().map(|r| r.dst_offset).collect();
        assert_eq!(src, [0, 1004, 1012]);
        assert_eq!(dst, [0, 65536, 131072]);
        // Every page is declared the most a page can hold, in its own slot.
        assert!(p.regions.iter().all(|r| r.dst_size == 65536));
        for (i, d) in laid.iter().enumerate() {
            // Realign reads the page where it is and writes its slot.
            let r = p.realign[i];
            assert_eq!(
                (r.src_offset, r.src_size, r.dst_size),
                (d.src_offset, d.src_size, d.src_size)
            );
            assert_eq!(u64::from(r.dst_offset), p.regions[i].src_offset);
            assert_eq!((r.row_bytes, r.row_pitch), (0, 0));
            // Lay-out reads the slot and writes what the WGSL decoder would.
            let l = p.relayout[i];
            assert_eq!(u64::from(l.src_offset), p.regions[i].dst_offset);
            assert_eq!(l.src_size, d.dst_size);
            assert_eq!(
                (l.dst_offset, l.dst_size, l.row_bytes, l.row_pitch),
                (d.dst_offset, d.dst_size, d.row_bytes, d.row_pitch)
            );
            // A stored-copy descriptor: equal sizes.
            assert_eq!(l.src_size, l.dst_size);
        }
    }

    #[test]
    fn batches_that_do_not_fit_or_break_the_rules_go_to_wgsl() {
        let one = [page(0, 100, 0, 1000, (0, 0))];
        assert!(plan(&one, 100, 65536).is_some());
        assert!(plan(&one, 99, 65536).is_none());
        assert!(plan(&one, 100, 65535).is_none());
        assert!(plan(&[page(0, 0, 0, 1000, (0, 0))], 1 << 20, 1 << 20).is_none());
        assert!(plan(&[page(0, 10, 0, 0, (0, 0))], 1 << 20, 1 << 20).is_none());
        assert!(plan(&[page(0, 10, 0, 65540, (0, 0))], 1 << 20, 1 << 20).is_none());
        assert!(plan(&[page(0, 65540, 0, 65536, (0, 0))], 1 << 20, 1 << 20).is_none());
        assert_eq!(plan(&[], 0, 0).map(|p| p.regions.len()), Some(0));
    }

    /// The empty entries that pad each target's run to a run boundary stay
    /// in place (so descriptor i is still entry i) and get no region.
    #[test]
    fn run_padding_is_kept_in_place_and_not_decoded() {
        let pad = BlockDesc::linear(0, 0, 0, 0);
        let laid = [
            page(0, 100, 0, 1000, (0, 0)),
            pad,
            pad,
            page(100, 50, 0, 300, (0, 0)),
        ];
        let p = plan(&laid, 1 << 20, 1 << 20).expect("fits");
        assert_eq!(p.regions.len(), 2);
        assert_eq!((p.realign.len(), p.relayout.len()), (4, 4));
        assert_eq!((p.realign[1], p.relayout[2]), (pad, pad));
        assert_eq!(p.relayout[3].src_offset as u64, p.regions[1].dst_offset);
        assert_eq!(relayout_base(4), 64);
        assert_eq!(relayout_base(64), 64);
        assert_eq!(
            relayout_base(65) * std::mem::size_of::<BlockDesc>() % 256,
            0
        );
    }
}
