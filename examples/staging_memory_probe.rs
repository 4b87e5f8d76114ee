//! Which Vulkan memory type a staging buffer lands in: the probe the device
//! script (scripts/device-run.sh) runs on the GPU machine.
//!
//! wgpu does not expose a buffer's allocation, and Vulkan has no query for
//! the memory a buffer is bound to, so this probe reconstructs the choice:
//! it creates buffers shaped like the runtime's staging buffers
//! (`MAP_WRITE | COPY_SRC`, see src/staging/mod.rs) through wgpu, reads
//! their memory requirements through wgpu's Vulkan hal, lists the adapter's
//! memory types and heaps, and applies the rule wgpu-hal 30 hands to
//! gpu-allocator 0.28 for mappable-for-write buffers (`CpuToGpu`): the first
//! allowed type that is HOST_VISIBLE | HOST_COHERENT | DEVICE_LOCAL (BAR or
//! resizable-BAR memory), else the first HOST_VISIBLE | HOST_COHERENT one;
//! and when the allocation does not fit the chosen type's heap (a 256 MiB
//! BAR without resizable BAR), gpu-allocator falls back to the second rule.
//! That reconstruction is what it reports; re-check it when wgpu-hal or
//! gpu-allocator is upgraded.
//!
//! Then it says which memory the runtime's staging actually got (imported
//! host memory where the device takes `VK_EXT_external_memory_host`), and
//! times the CPU's copies into and out of a mapped `MAP_WRITE` buffer and
//! ordinary host memory: on a GPU with a large BAR, reading the first back
//! is what made decoding into staging slow.
//!
//! Run: `WGPU_BACKEND=vulkan cargo run --release --example staging_memory_probe -- [MiB,MiB,...] [--json FILE]`
//! (default sizes 64,256,1024). Vulkan only: other backends print why not.

use gpustream_tools::gpu::open_device;

const DEVICE_LOCAL: u32 = 0x1;
const HOST_VISIBLE: u32 = 0x2;
const HOST_COHERENT: u32 = 0x4;
const HOST_CACHED: u32 = 0x8;
/// gpu-allocator skips these (LAZILY_ALLOCATED, PROTECTED).
const INVALID: u32 = 0x10 | 0x20;

fn flag_names(bits: u32) -> Vec<&'static str> {
    [
        (DEVICE_LOCAL, "DEVICE_LOCAL"),
        (HOST_VISIBLE, "HOST_VISIBLE"),
        (HOST_COHERENT, "HOST_COHERENT"),
        (HOST_CACHED, "HOST_CACHED"),
    ]
    .into_iter()
    .filter(|(b, _)| bits & b != 0)
    .map(|(_, n)| n)
    .collect()
}

fn main() {
    let mut sizes: Vec<u64> = vec![64, 256, 1024];
    let mut json_path = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--json" {
            json_path = args.next();
        } else {
            sizes = a
                .split(',')
                .map(|s| s.parse().expect("sizes in MiB, comma-separated"))
                .collect();
        }
    }
    let ctx = match open_device() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("no device: {e}");
            std::process::exit(1);
        }
    };
    let max = ctx.device.limits().max_buffer_size;
    let mut rows = Vec::new();
    let mut types_json = Vec::new();
    // SAFETY: the hal device is only used to read properties and the
    // memory requirements of buffers that stay alive (and unmapped, unused
    // by any queue) for the whole block; nothing is created or destroyed
    // through it.
    let report = unsafe {
        let Some(hal) = ctx.device.as_hal::<wgpu::hal::api::Vulkan>() else {
            let msg = format!(
                "not a Vulkan device ({}): no memory-type report",
                ctx.describe()
            );
            println!("{msg}");
            if let Some(path) = json_path {
                let doc = serde_json::json!({ "adapter": ctx.describe(), "error": msg });
                std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
            }
            return;
        };
        let instance = hal.shared_instance().raw_instance();
        let props = instance.get_physical_device_memory_properties(hal.raw_physical_device());
        let types = &props.memory_types[..props.memory_type_count as usize];
        let heaps = &props.memory_heaps[..props.memory_heap_count as usize];
        println!("# {}: memory types", ctx.describe());
        for (i, t) in types.iter().enumerate() {
            let heap = heaps[t.heap_index as usize];
            let flags = t.property_flags.as_raw();
            println!(
                "type {i}: heap {} ({} MiB), {:?}",
                t.heap_index,
                heap.size >> 20,
                flag_names(flags)
            );
            types_json.push(serde_json::json!({
                "index": i, "heap": t.heap_index, "heap_mib": heap.size >> 20,
                "flags": flag_names(flags),
            }));
        }
        for &mib in &sizes {
            let size = (mib << 20).min(max);
            let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("staging-shaped probe"),
                size,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let Some(raw) = buffer.as_hal::<wgpu::hal::api::Vulkan>() else {
                continue;
            };
            let req = hal
                .raw_device()
                .get_buffer_memory_requirements(raw.raw_handle());
            let pick = |want: u32| {
                types.iter().enumerate().position(|(i, t)| {
                    let f = t.property_flags.as_raw();
                    req.memory_type_bits & (1 << i) != 0 && f & want == want && f & INVALID == 0
                })
            };
            let preferred = pick(HOST_VISIBLE | HOST_COHERENT | DEVICE_LOCAL);
            let host = pick(HOST_VISIBLE | HOST_COHERENT);
            // gpu-allocator refuses a type whose heap is smaller than the
            // allocation and then retries with host memory.
            let chosen = match preferred {
                Some(i) if heaps[types[i].heap_index as usize].size >= req.size => preferred,
                _ => host,
            };
            let flags = chosen
                .map(|i| types[i].property_flags.as_raw())
                .unwrap_or(0);
            let cpu_adapter = ctx.adapter.get_info().device_type == wgpu::DeviceType::Cpu;
            let landed = if cpu_adapter {
                "system RAM (a CPU adapter: all its memory types are)"
            } else if flags & DEVICE_LOCAL != 0 {
                "device-local, host-visible (BAR / resizable BAR): CPU writes cross PCIe as they happen"
            } else {
                "host memory (system RAM): the GPU reads it over PCIe"
            };
            println!(
                "staging {mib} MiB: memory_type_bits {:#x}, type {:?} {:?}: {landed}",
                req.memory_type_bits,
                chosen,
                flag_names(flags)
            );
            rows.push(serde_json::json!({
                "staging_mib": mib, "memory_type_bits": req.memory_type_bits,
                "type": chosen, "flags": flag_names(flags), "landed": landed,
            }));
        }
        serde_json::json!({
            "adapter": ctx.describe(),
            "driver": ctx.adapter.get_info().driver_info,
            "method": "reconstructed: wgpu-hal 30 CpuToGpu rule of gpu-allocator 0.28 over the buffer's memory requirements",
            "memory_types": types_json,
            "staging": rows,
        })
    };
    let mut report = report;
    let rates = copy_rates(&ctx, sizes.iter().copied().max().unwrap_or(256).min(256));
    report["copy_rates"] = rates;
    if let Some(path) = json_path {
        std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap())
            .unwrap_or_else(|e| panic!("write {path}: {e}"));
    }
}

/// What the runtime's staging got on this device, and the CPU's copy rates
/// into and out of the two kinds of staging: a wgpu `MAP_WRITE` buffer
/// mapped at creation (BAR memory on a GPU with a large BAR, where reads
/// are uncached) and ordinary host memory (what imported host memory is).
fn copy_rates(ctx: &gpustream_tools::gpu::GpuContext, mib: u64) -> serde_json::Value {
    use std::time::Instant;
    let len = (mib << 20) as usize;
    let src = vec![0x5au8; len];
    let mut back = vec![0u8; len];
    let gbps = |f: &mut dyn FnMut()| {
        f(); // first touch: page faults, not the copy
        let t = Instant::now();
        for _ in 0..3 {
            f();
        }
        3.0 * len as f64 / t.elapsed().as_secs_f64() / 1e9
    };
    let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("staging probe copy"),
        size: len as u64,
        usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: true,
    });
    let (into_wgpu, out_of_wgpu) = match buffer.slice(..).get_mapped_range_mut() {
        Ok(mut view) => {
            // wgpu 30 hands out mapped memory write-only; the read-back rate
            // is what a decoder reading its own output from staging paid.
            let ptr = view.slice(..).as_raw_element_ptr();
            let into = gbps(&mut || view.copy_from_slice(&src));
            // SAFETY: `len` bytes of a live mapping, written above, read
            // while nothing writes them.
            let out = gbps(&mut || unsafe {
                std::ptr::copy_nonoverlapping(ptr.as_ptr().cast_const(), back.as_mut_ptr(), len)
            });
            (into, out)
        }
        Err(e) => {
            eprintln!("mapping the probe buffer failed: {e}");
            (0.0, 0.0)
        }
    };
    drop(buffer);
    let mut host = vec![0u8; len];
    let into_host = gbps(&mut || host.copy_from_slice(&src));
    let out_of_host = gbps(&mut || back.copy_from_slice(&host));
    let config = gpustream::runtime::RuntimeConfig::default().with_staging_size(64 << 20);
    let staging = match gpustream::runtime::Runtime::new(&ctx.device, &ctx.queue, config) {
        Ok(rt) => rt
            .staging_memory()
            .map_or_else(|| "none".to_string(), ToString::to_string),
        Err(e) => format!("no runtime: {e}"),
    };
    println!("runtime staging: {staging}");
    println!(
        "memcpy {mib} MiB: into a wgpu MAP_WRITE buffer {into_wgpu:.2} GB/s, out of it {out_of_wgpu:.2} GB/s; into host memory {into_host:.2} GB/s, out of it {out_of_host:.2} GB/s"
    );
    serde_json::json!({
        "runtime_staging": staging,
        "mib": mib,
        "into_wgpu_map_write_gbps": into_wgpu,
        "out_of_wgpu_map_write_gbps": out_of_wgpu,
        "into_host_gbps": into_host,
        "out_of_host_gbps": out_of_host,
    })
}
