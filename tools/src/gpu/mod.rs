//! Finding a wgpu adapter and device for the tools, tests and benchmarks.
//!
//! The runtime itself never creates a device: applications hand it theirs.
//! This module is for the `gpustream` binary, the examples and the tests,
//! which need one of their own.
//!
//! Adapter choice (`open_device_for`):
//! - `None` (auto): every adapter wgpu enumerates (honouring `WGPU_BACKEND`
//!   and friends) is ranked: Vulkan, Metal or DX12 before GL, because wgpu's
//!   GL backend lacks subgroups and cannot copy BC textures back; within that,
//!   a real GPU before a virtual one before a CPU one. `WGPU_ADAPTER_NAME`,
//!   when set, names the adapter as `Some(name)` would.
//! - `Some("noop")`: wgpu's noop backend, which creates, maps and copies
//!   buffers but runs no passes: the host side of the GPU path, alone.
//! - `Some(name)`: the first adapter whose backend is `name`, else the first
//!   whose name or backend name contains it (case-insensitive).

mod decode;
pub use decode::{decode_blocks_on_gpu, decode_blocks_with, decode_pages, read_buffer};

/// A device and queue opened by gpustream's tools.
pub struct GpuContext {
    /// The adapter the device came from.
    pub adapter: wgpu::Adapter,
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Why this adapter was chosen, for reports: e.g. "Vulkan preferred over
    /// GL on llvmpipe" or "asked for with --adapter noop".
    pub reason: String,
}

impl GpuContext {
    /// One line naming the adapter, its backend and device type, for reports.
    pub fn describe(&self) -> String {
        describe_info(&self.adapter.get_info())
    }

    /// Why this device cannot do `cap`, or `None` when it can.
    pub fn lacks(&self, cap: Capability) -> Option<String> {
        let info = self.adapter.get_info();
        match cap {
            Capability::BcReadback => {
                if !self
                    .device
                    .features()
                    .contains(wgpu::Features::TEXTURE_COMPRESSION_BC)
                {
                    Some(format!("{} lacks TEXTURE_COMPRESSION_BC", self.describe()))
                } else if info.backend == wgpu::Backend::Gl {
                    // Measured on llvmpipe: a BC7 texture copied back with
                    // copy_texture_to_buffer reads as zeros on wgpu's GL backend.
                    Some(format!(
                        "no Vulkan/Metal/DX12 adapter: only GL on {}, which cannot read back BC textures",
                        info.name
                    ))
                } else if info.backend == wgpu::Backend::Noop {
                    Some("the noop backend stores nothing in textures".to_string())
                } else {
                    None
                }
            }
            Capability::ComputePasses => (info.backend == wgpu::Backend::Noop)
                .then(|| "the noop backend runs no compute passes".to_string()),
            Capability::RenderReadback => (info.backend == wgpu::Backend::Gl).then(|| {
                format!(
                    "no Vulkan/Metal/DX12 adapter: only GL on {}, where rendered frames \
                     read back wrong (cause not yet found)",
                    info.name
                )
            }),
            Capability::LongStreaming => (info.backend == wgpu::Backend::Gl).then(|| {
                format!(
                    "no Vulkan/Metal/DX12 adapter: only GL on {}, where a GPU-decode \
                     submission holding the GL context over 6 s makes the runtime's \
                     poll thread panic (\"Could not lock adapter context\")",
                    info.name
                )
            }),
        }
    }
}

/// Something a GPU test needs beyond a device, which some adapters lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Capability {
    /// BC textures can be created, written by a buffer copy and copied back.
    BcReadback,
    /// Compute passes run (every backend but noop).
    ComputePasses,
    /// Frames rendered by the virtual-texturing demo read back as drawn:
    /// not on wgpu's GL backend, where 6% to 95% of their pixels matched no
    /// tile colour on llvmpipe (2026-12-01; cause not yet found).
    RenderReadback,
    /// The runtime can stream for minutes with its poll thread sharing the
    /// device: not on wgpu's GL backend, which serialises every call on one
    /// context lock and panics when a call waits over 6 s for it (seen in
    /// `bench --quick` on llvmpipe, 2026-12-01).
    LongStreaming,
}

/// Why no device could be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No adapter matched.
    #[error("no wgpu adapter found: {0}")]
    NoAdapter(String),
    /// Adapters exist but none matches the name asked for.
    #[error("no wgpu adapter matches {wanted:?}; found: {found}")]
    NoMatch {
        /// The name asked for.
        wanted: String,
        /// Every adapter found, described, or "none".
        found: String,
    },
    /// The adapter refused the device.
    #[error("the adapter refused to create a device: {0}")]
    Device(String),
}

/// Opens the best adapter wgpu finds: `open_device_for(None)`.
pub fn open_device() -> Result<GpuContext, GpuError> {
    open_device_for(None)
}

/// Opens the adapter `adapter` names (see the module docs for the rules),
/// asking for the features gpustream can use when the adapter has them
/// (subgroups, BC textures, timestamp queries), the adapter's own limits,
/// and the driver's GDeflate decoder where it offers one
/// ([`request_device`](gpustream::decode::gpu::driver_gdeflate::request_device)).
pub fn open_device_for(adapter: Option<&str>) -> Result<GpuContext, GpuError> {
    let from_env = std::env::var("WGPU_ADAPTER_NAME")
        .ok()
        .filter(|s| !s.is_empty());
    let (adapter, reason) = match (adapter, from_env.as_deref()) {
        (Some(name), _) if name.eq_ignore_ascii_case("noop") => (
            noop_adapter()?,
            "asked for with --adapter noop (buffers only: no passes run)".to_string(),
        ),
        (Some(name), _) => {
            let a = named_adapter(name)?;
            (a, format!("asked for with --adapter {name}"))
        }
        (None, Some(name)) => {
            let a = named_adapter(name)?;
            (a, format!("named by WGPU_ADAPTER_NAME={name}"))
        }
        (None, None) => auto_adapter()?,
    };
    let wanted = wgpu::Features::SUBGROUP
        | wgpu::Features::TEXTURE_COMPRESSION_BC
        | wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
    let features = adapter.features() & wanted;
    // With the driver's GDeflate decoder enabled where it has one.
    let (device, queue) = gpustream::decode::gpu::driver_gdeflate::request_device(
        &adapter,
        &wgpu::DeviceDescriptor {
            label: Some("gpustream"),
            required_features: features,
            required_limits: adapter.limits(),
            ..Default::default()
        },
    )
    .map_err(|e| GpuError::Device(e.to_string()))?;
    Ok(GpuContext {
        adapter,
        device,
        queue,
        reason,
    })
}

/// "name (Backend, DeviceType)".
fn describe_info(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

/// Every adapter of the backends the environment allows.
fn enumerate() -> Vec<wgpu::Adapter> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
}

/// Every adapter, described, for error messages.
fn list(adapters: &[wgpu::Adapter]) -> String {
    if adapters.is_empty() {
        return "none (on Linux without a GPU, install mesa-vulkan-drivers for lavapipe)".into();
    }
    adapters
        .iter()
        .map(|a| describe_info(&a.get_info()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// wgpu's noop backend, enabled explicitly (it never appears on its own).
fn noop_adapter() -> Result<wgpu::Adapter, GpuError> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::NOOP;
    desc.backend_options.noop = wgpu::NoopBackendOptions::enabled();
    let instance = wgpu::Instance::new(desc);
    pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
        .map_err(|e| GpuError::NoAdapter(format!("noop backend: {e}")))
}

/// The adapter whose backend is `name`, else the first whose name or
/// backend name contains it, ignoring case. The backend rule comes first so
/// that "gl" means the GL backend, not a Vulkan adapter with "gl" in its name.
fn named_adapter(name: &str) -> Result<wgpu::Adapter, GpuError> {
    let adapters = enumerate();
    let wanted = name.to_lowercase();
    let by_backend = adapters
        .iter()
        .position(|a| a.get_info().backend.to_str() == wanted);
    let by_name = || {
        adapters.iter().position(|a| {
            let info = a.get_info();
            info.name.to_lowercase().contains(&wanted) || info.backend.to_str().contains(&wanted)
        })
    };
    match by_backend.or_else(by_name) {
        Some(i) => Ok(adapters.into_iter().nth(i).expect("index from position")),
        None => Err(GpuError::NoMatch {
            wanted: name.to_string(),
            found: list(&adapters),
        }),
    }
}

/// Rank of a backend: lower is preferred. GL last among real backends
/// (no subgroups, no BC readback); noop never chosen over a real one.
fn backend_rank(b: wgpu::Backend) -> u8 {
    match b {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        wgpu::Backend::Gl => 1,
        _ => 2,
    }
}

/// Rank of a device type: a real GPU before a virtual one before a CPU one.
fn device_rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// The best adapter by backend, then device type, with why.
fn auto_adapter() -> Result<(wgpu::Adapter, String), GpuError> {
    let adapters = enumerate();
    let infos: Vec<wgpu::AdapterInfo> = adapters.iter().map(|a| a.get_info()).collect();
    let best = (0..infos.len())
        .min_by_key(|&i| {
            (
                backend_rank(infos[i].backend),
                device_rank(infos[i].device_type),
            )
        })
        .ok_or_else(|| GpuError::NoAdapter(list(&adapters)))?;
    let reason = choice_reason(&infos, best);
    let adapter = adapters.into_iter().nth(best).expect("index in range");
    Ok((adapter, reason))
}

/// A backend as people write it.
fn backend_name(b: wgpu::Backend) -> &'static str {
    match b {
        wgpu::Backend::Vulkan => "Vulkan",
        wgpu::Backend::Metal => "Metal",
        wgpu::Backend::Dx12 => "DX12",
        wgpu::Backend::Gl => "GL",
        other => other.to_str(),
    }
}

/// Why `infos[best]` won over the others, in one phrase, noting a
/// `WGPU_BACKEND` that narrowed the field.
fn choice_reason(infos: &[wgpu::AdapterInfo], best: usize) -> String {
    let why = compare(infos, best);
    match std::env::var("WGPU_BACKEND") {
        Ok(v) if !v.is_empty() => format!("{why}, among the backends WGPU_BACKEND={v} allows"),
        _ => why,
    }
}

/// Why `infos[best]` won over the others.
fn compare(infos: &[wgpu::AdapterInfo], best: usize) -> String {
    let chosen = &infos[best];
    let others: Vec<&wgpu::AdapterInfo> = (0..infos.len())
        .filter(|&i| i != best)
        .map(|i| &infos[i])
        .collect();
    let backend = backend_name(chosen.backend);
    if let Some(worse) = others
        .iter()
        .find(|o| backend_rank(o.backend) > backend_rank(chosen.backend))
    {
        return format!(
            "{backend} preferred over {} on {}",
            backend_name(worse.backend),
            worse.name
        );
    }
    if let Some(worse) = others
        .iter()
        .find(|o| device_rank(o.device_type) > device_rank(chosen.device_type))
    {
        return format!(
            "{:?} preferred over {:?} ({})",
            chosen.device_type, worse.device_type, worse.name
        );
    }
    if backend_rank(chosen.backend) > 0 {
        return format!("no Vulkan/Metal/DX12 adapter found, only {backend}");
    }
    if others.is_empty() {
        "the only adapter wgpu found".to_string()
    } else {
        "the first of equally ranked adapters".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(
        name: &str,
        backend: wgpu::Backend,
        device_type: wgpu::DeviceType,
    ) -> wgpu::AdapterInfo {
        let mut info = wgpu::AdapterInfo::new(device_type, backend);
        info.name = name.into();
        info
    }

    #[test]
    fn ranking_prefers_vulkan_over_gl_and_gpu_over_cpu() {
        use wgpu::{Backend::*, DeviceType::*};
        assert!(backend_rank(Vulkan) < backend_rank(Gl));
        assert!(backend_rank(Gl) < backend_rank(Noop));
        assert!(device_rank(DiscreteGpu) < device_rank(Cpu));
        let infos = [info("llvmpipe", Gl, Cpu), info("lavapipe", Vulkan, Cpu)];
        assert_eq!(compare(&infos, 1), "Vulkan preferred over GL on llvmpipe");
        let infos = [
            info("lavapipe", Vulkan, Cpu),
            info("NVIDIA", Vulkan, DiscreteGpu),
        ];
        assert_eq!(
            compare(&infos, 1),
            "DiscreteGpu preferred over Cpu (lavapipe)"
        );
        assert_eq!(
            compare(&[info("llvmpipe", Gl, Cpu)], 0),
            "no Vulkan/Metal/DX12 adapter found, only GL"
        );
    }
}
