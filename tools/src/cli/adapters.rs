//! `gpustream adapters`: what wgpu sees on this machine.

use super::CliResult;

/// Arguments of `gpustream adapters`.
#[derive(clap::Args)]
pub struct Args {}

/// Lists every adapter with its backend, the features gpustream uses and the
/// limits that size its dispatches, then the one gpustream's tools would use
/// by default and why.
pub fn run(_args: Args) -> CliResult {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    if adapters.is_empty() {
        println!(
            "no wgpu adapters (on Linux without a GPU, install mesa-vulkan-drivers for lavapipe)"
        );
    }
    for a in adapters {
        let info = a.get_info();
        let f = a.features();
        let l = a.limits();
        println!(
            "{} ({:?}, {:?}, driver {} {})",
            info.name, info.backend, info.device_type, info.driver, info.driver_info
        );
        println!(
            "  subgroups: {}  BC textures: {}  timestamps: {}",
            f.contains(wgpu::Features::SUBGROUP),
            f.contains(wgpu::Features::TEXTURE_COMPRESSION_BC),
            f.contains(wgpu::Features::TIMESTAMP_QUERY)
        );
        println!(
            "  max storage binding {} MiB, max buffer {} MiB, workgroup storage {} KiB, subgroup size {}..{}",
            l.max_storage_buffer_binding_size >> 20,
            l.max_buffer_size >> 20,
            l.max_compute_workgroup_storage_size >> 10,
            info.subgroup_min_size,
            info.subgroup_max_size
        );
        // The driver's own GDeflate decoder, which gpustream enables when
        // it opens a device on this adapter.
        println!(
            "  driver GDeflate decoder: {}",
            gpustream::decode::gpu::driver_gdeflate::offered_extension(&a)
                .map_or("none (no VK_EXT/VK_NV_memory_decompression)", |e| e.name())
        );
    }
    println!("(wgpu's noop backend: --adapter noop)");
    match gpustream_tools::gpu::open_device() {
        Ok(ctx) => {
            println!(
                "gpustream uses: {}\n  because: {}",
                ctx.describe(),
                ctx.reason
            );
            println!("  GDeflate decoder: {}", gdeflate_choice(&ctx.device));
            // The staging memory a runtime on this device gets.
            match gpustream::runtime::Runtime::new(
                &ctx.device,
                &ctx.queue,
                crate::cli::env::runtime_config()?,
            ) {
                Ok(rt) => {
                    if let Some(m) = rt.staging_memory() {
                        println!("  staging memory: {m}");
                    }
                }
                Err(e) => println!("  staging memory: no runtime ({e})"),
            }
        }
        Err(e) => println!("gpustream uses: none ({e})"),
    }
    Ok(())
}

/// The GDeflate decoder a runtime on `device` would run, and why (the
/// preference from GPUSTREAM_GDEFLATE_DECODER, else the default).
pub(crate) fn gdeflate_choice(device: &wgpu::Device) -> String {
    use gpustream::decode::gpu::driver_gdeflate;
    match crate::cli::env::gdeflate_decoder() {
        Ok((pref, source)) => {
            driver_gdeflate::choose(driver_gdeflate::support(device), pref, source).to_string()
        }
        Err(e) => e,
    }
}
