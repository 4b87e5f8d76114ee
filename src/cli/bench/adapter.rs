//! Which wgpu adapter `bench` runs on, and why.
//!
//! Stand-in for `gpustream::gpu::open_device_for` (being added to `gpu.rs`
//! in another branch): at merge time [`open_adapter`] becomes a call to it.

use gpustream::gpu::GpuContext;

/// Opens the adapter `name` asks for and says why it was chosen.
///
/// - `None`: the adapters wgpu offers under its environment (`WGPU_BACKEND`
///   and friends), preferring Vulkan, Metal and DX12 over GL, then discrete
///   over integrated over software.
/// - `Some("noop")`: wgpu's noop backend (buffers are created, mapped and
///   copied; shaders do not run, textures store nothing).
/// - `Some(other)`: the best adapter whose backend or name contains `other`
///   (case-insensitive), from every backend compiled in.
pub(super) fn open_adapter(name: Option<&str>) -> Result<(GpuContext, String), String> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    let wanted = name.map(str::to_ascii_lowercase);
    match wanted.as_deref() {
        Some("noop") => {
            desc.backends = wgpu::Backends::NOOP;
            desc.backend_options.noop.enable = true;
        }
        // A backend's name ("vulkan", "gl", ...) opens only that backend; any
        // other name picks among every backend, whatever WGPU_BACKEND says.
        Some(w) => {
            let named = wgpu::Backends::from_comma_list(w) - wgpu::Backends::NOOP;
            desc.backends = if named.is_empty() {
                wgpu::Backends::all() - wgpu::Backends::NOOP
            } else {
                named
            };
        }
        None => desc.backends -= wgpu::Backends::NOOP,
    }
    let backends = desc.backends;
    let instance = wgpu::Instance::new(desc);
    let adapters = pollster::block_on(instance.enumerate_adapters(backends));
    let seen: Vec<String> = adapters.iter().map(describe_info).collect();
    let matching = |a: &wgpu::Adapter| match wanted.as_deref() {
        None | Some("noop") => true,
        Some(w) => {
            let info = a.get_info();
            backends.contains(info.backend.into()) && !wgpu::Backends::from_comma_list(w).is_empty()
                || info.name.to_ascii_lowercase().contains(w)
        }
    };
    let Some(adapter) = adapters.into_iter().filter(matching).min_by_key(preference) else {
        return Err(match name {
            Some(n) => format!("no adapter matches '{n}' (wgpu offers: {seen:?})"),
            None => format!("no wgpu adapter under backends {backends:?}"),
        });
    };
    let why = match name {
        Some(n) if n.eq_ignore_ascii_case("noop") => {
            "--adapter noop: wgpu's noop backend (shaders do not run)".to_string()
        }
        Some(n) => format!("--adapter {n}: best match among {seen:?}"),
        None => format!(
            "automatic: Vulkan/Metal/DX12 preferred over GL, discrete over software, among {seen:?} (backends {backends:?})"
        ),
    };
    let features = adapter.features()
        & (wgpu::Features::SUBGROUP
            | wgpu::Features::TEXTURE_COMPRESSION_BC
            | wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("gpustream bench"),
        required_features: features,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| {
        format!(
            "{}: the adapter refused a device: {e}",
            describe_info(&adapter)
        )
    })?;
    Ok((
        GpuContext {
            adapter,
            device,
            queue,
        },
        why,
    ))
}

/// Lower is better: native APIs before GL, then real hardware before
/// software.
fn preference(a: &wgpu::Adapter) -> (u8, u8) {
    let info = a.get_info();
    let api = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        wgpu::Backend::Gl => 1,
        _ => 2,
    };
    let kind = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    };
    (api, kind)
}

fn describe_info(a: &wgpu::Adapter) -> String {
    let info = a.get_info();
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

/// Whether a context runs on wgpu's noop backend.
pub(super) fn is_noop(ctx: &GpuContext) -> bool {
    ctx.adapter.get_info().backend == wgpu::Backend::Noop
}
