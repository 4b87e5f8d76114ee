//! `gpustream verify`: check every block's checksum and decode it.

use super::CliResult;
use gpustream::pack::{Pack, PackError};
use std::path::PathBuf;

/// Arguments of `gpustream verify`.
#[derive(clap::Args)]
pub struct Args {
    /// The pack.
    pack: PathBuf,
    /// Also decode every LZ4 block with the GPU decoder and compare it with
    /// the CPU decode: checks the GPU path on this machine's adapter and driver.
    #[arg(long)]
    gpu: bool,
    /// The adapter for `--gpu`: a backend ("vulkan", "gl"), part of an
    /// adapter's name ("llvmpipe", "NVIDIA"), or "noop". Default: the best
    /// adapter found, Vulkan, Metal or DX12 before GL.
    #[arg(long, requires = "gpu")]
    adapter: Option<String>,
}

/// Runs `gpustream verify`: lists every bad block and fails if there is one.
pub fn run(args: Args) -> CliResult {
    let pack = Pack::open(&args.pack)?;
    let bar = indicatif::ProgressBar::new(pack.blocks().len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} verifying [{bar:40}] {pos}/{len} blocks",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    let bad = pack.verify(|n| bar.set_position(n as u64))?;
    bar.finish_and_clear();
    for e in &bad {
        let what = match e {
            PackError::BlockChecksum { .. } => "checksum mismatch",
            PackError::BlockDecode { .. } => "does not decode",
            _ => "bad",
        };
        println!("BAD {what}: {e}");
    }
    let total: u64 = pack.blocks().iter().map(|b| b.size as u64).sum();
    let gpu_bad = if args.gpu {
        verify_gpu(&pack, args.adapter.as_deref())?
    } else {
        0
    };
    if bad.is_empty() && gpu_bad == 0 {
        println!(
            "{}: all {} blocks of {} assets OK ({} bytes decoded)",
            args.pack.display(),
            pack.blocks().len(),
            pack.assets().len(),
            total
        );
        Ok(())
    } else {
        Err(format!(
            "{}: {} of {} blocks are bad{}",
            args.pack.display(),
            bad.len(),
            pack.blocks().len(),
            if gpu_bad > 0 {
                format!(", {gpu_bad} LZ4 blocks decode differently on the GPU")
            } else {
                String::new()
            }
        )
        .into())
    }
}

/// Decodes every LZ4 block and GDeflate page on the GPU, batch by batch, and compares each with
/// the CPU decode; prints every mismatch by asset and block. Returns the
/// number of mismatches.
fn verify_gpu(
    pack: &Pack,
    adapter: Option<&str>,
) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
    let ctx = gpustream_tools::gpu::open_device_for(adapter)?;
    println!("GPU: {}\n  because: {}", ctx.describe(), ctx.reason);
    if let Some(why) = ctx.lacks(gpustream_tools::gpu::Capability::ComputePasses) {
        // Every block would "mismatch": say why instead of blaming the decoder.
        return Err(format!("cannot check the GPU decoder on {}: {why}", ctx.describe()).into());
    }
    let lz4 = gpustream::decode::gpu::Lz4DecodePipeline::new(&ctx.device);
    let gdeflate = gpustream::decode::gpu::GDeflateDecodePipeline::new(&ctx.device);
    // Every file the blocks lie in (several for a striped pack).
    let files = pack
        .members()
        .iter()
        .map(|m| std::fs::read(&m.path).map_err(|e| format!("{}: {e}", m.path.display())))
        .collect::<Result<Vec<_>, _>>()?;
    let ids: Vec<u32> = (0..pack.blocks().len() as u32)
        .filter(|&i| {
            matches!(
                pack.blocks()[i as usize].codec,
                gpustream::Codec::Lz4 | gpustream::Codec::GDeflate
            )
        })
        .collect();
    let bar = indicatif::ProgressBar::new(ids.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} GPU decode on {msg} [{bar:40}] {pos}/{len} LZ4 and GDeflate blocks",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    bar.set_message(ctx.describe());
    let mut mismatches = 0;
    // One codec a batch: LZ4 blocks, then GDeflate pages.
    let (lz4_ids, gd_ids): (Vec<u32>, Vec<u32>) = ids
        .iter()
        .partition(|&&i| pack.blocks()[i as usize].codec == gpustream::Codec::Lz4);
    let batches = lz4_ids.chunks(1024).chain(gd_ids.chunks(256));
    for batch in batches {
        // One GPU input per LZ4 stream: a block, or each of its sub-blocks.
        let mut inputs = Vec::new();
        let mut spans = Vec::new();
        let mut wanted = Vec::new();
        for &i in batch {
            let id = gpustream::pack::BlockId(i);
            let b = pack.blocks()[i as usize];
            let stored = files[b.member as usize]
                .get(b.offset as usize..b.offset as usize + b.stored_size as usize)
                .unwrap_or(&[]);
            let mut cpu = vec![0u8; b.size as usize];
            // Blocks the CPU already rejects were reported above.
            let ok = pack.check_block(id, stored, &mut cpu).is_ok();
            let from = inputs.len();
            match pack.sub_blocks(id) {
                [] => inputs.push((stored, b.size as usize)),
                subs => inputs.extend(subs.iter().map(|s| {
                    let at = s.stored_offset as usize;
                    let part = stored.get(at..at + s.stored_len as usize).unwrap_or(&[]);
                    (part, s.size as usize)
                })),
            }
            spans.push(from..inputs.len());
            wanted.push(ok.then_some(cpu));
        }
        let gd = pack.blocks()[batch[0] as usize].codec == gpustream::Codec::GDeflate;
        let decoded: Vec<Result<Vec<u8>, String>> = if gd {
            gpustream_tools::gpu::decode_pages(&ctx, &gdeflate, &inputs)
                .into_iter()
                .map(|r| r.map_err(|st| st.to_string()))
                .collect()
        } else {
            gpustream_tools::gpu::decode_blocks_with(&ctx, &lz4, &inputs)
                .into_iter()
                .map(|r| r.map_err(|st| st.to_string()))
                .collect()
        };
        for ((&i, want), span) in batch.iter().zip(&wanted).zip(spans) {
            let Some(want) = want else { continue };
            let b = pack.blocks()[i as usize];
            let got: Result<Vec<u8>, String> =
                decoded[span].iter().try_fold(Vec::new(), |mut all, r| {
                    all.extend_from_slice(r.as_ref().map_err(|st| st.clone())?);
                    Ok(all)
                });
            // The GPU decoder writes a conditioned block in its
            // conditioned order; the transform is undone here, as the
            // runtime's decode threads undo it, before comparing.
            let got = got.map(|out| match b.transform {
                gpustream::pack::BlockTransform::None => out,
                t => {
                    let mut plain = vec![0u8; out.len()];
                    t.undo(&out, &mut plain);
                    plain
                }
            });
            match got {
                Ok(out) if out == *want => {}
                Ok(out) => {
                    let first = out
                        .iter()
                        .zip(want.iter())
                        .position(|(a, b)| a != b)
                        .unwrap_or(out.len().min(want.len()));
                    println!(
                        "GPU MISMATCH: {} at offset {}: first differing byte {first}",
                        pack.describe_block(gpustream::pack::BlockId(i)),
                        b.offset
                    );
                    mismatches += 1;
                }
                Err(status) => {
                    println!(
                        "GPU REJECTED: {} at offset {}: {status} (the CPU decodes it)",
                        pack.describe_block(gpustream::pack::BlockId(i)),
                        b.offset
                    );
                    mismatches += 1;
                }
            }
        }
        bar.inc(batch.len() as u64);
    }
    bar.finish_and_clear();
    println!(
        "GPU check on {}: {} LZ4 blocks, {} GDeflate pages, {} mismatches",
        ctx.describe(),
        lz4_ids.len(),
        gd_ids.len(),
        mismatches
    );
    Ok(mismatches)
}
