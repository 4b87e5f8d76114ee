//! Finding a wgpu adapter and device for the tools, tests and benchmarks.
//!
//! The runtime itself never creates a device: applications hand it theirs.
//! This module is for the `gpustream` binary, the examples and the tests,
//! which need one of their own.

/// A device and queue opened by gpustream's tools.
pub struct GpuContext {
    /// The adapter the device came from.
    pub adapter: wgpu::Adapter,
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
}

impl GpuContext {
    /// One line naming the adapter and backend, for reports.
    pub fn describe(&self) -> String {
        let info = self.adapter.get_info();
        format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
    }
}

/// Why no device could be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No adapter matched.
    #[error("no wgpu adapter found: {0}")]
    NoAdapter(String),
    /// The adapter refused the device.
    #[error("the adapter refused to create a device: {0}")]
    Device(String),
}

/// Opens the best adapter wgpu finds (honouring `WGPU_BACKEND`,
/// `WGPU_ADAPTER_NAME` and friends), asking for the features gpustream can
/// use when the adapter has them (subgroups, BC textures, timestamp queries)
/// and the adapter's own limits.
pub fn open_device() -> Result<GpuContext, GpuError> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        ..Default::default()
    }))
    .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
    let wanted = wgpu::Features::SUBGROUP
        | wgpu::Features::TEXTURE_COMPRESSION_BC
        | wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
    let features = adapter.features() & wanted;
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("gpustream"),
        required_features: features,
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .map_err(|e| GpuError::Device(e.to_string()))?;
    Ok(GpuContext {
        adapter,
        device,
        queue,
    })
}

/// The device for a GPU test. Where none exists it prints a loud notice and
/// returns `None` so the test can skip, unless `GPUSTREAM_REQUIRE_GPU=1`
/// (set by CI), which turns the missing adapter into a failure.
pub fn test_device() -> Option<GpuContext> {
    match open_device() {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            if std::env::var("GPUSTREAM_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("GPUSTREAM_REQUIRE_GPU=1 but no GPU device: {e}");
            }
            eprintln!("!!! SKIPPING GPU TEST: {e} (install mesa-vulkan-drivers for lavapipe)");
            None
        }
    }
}
