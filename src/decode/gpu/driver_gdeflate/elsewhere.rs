//! Off Linux the driver's decoder is not built (gpustream's Vulkan code is
//! tried on Linux only): nothing is offered, and the WGSL decoder runs.

use super::{DriverExtension, DriverRecordError, DriverRegion};

/// Always `None` here.
pub fn offered_extension(_adapter: &wgpu::Adapter) -> Option<DriverExtension> {
    None
}

/// Always `None` here.
pub fn offered_for_device(_device: &wgpu::Device) -> Option<DriverExtension> {
    None
}

/// Always `None` here.
pub fn enabled_extension(_device: &wgpu::Device) -> Option<DriverExtension> {
    None
}

/// `adapter.request_device(desc)`.
pub fn request_device(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> Result<(wgpu::Device, wgpu::Queue), super::DeviceOpenError> {
    Ok(pollster::block_on(adapter.request_device(desc))?)
}

/// Never built here (the uninhabited field: no value can exist). Its
/// `buffer` field matches the Vulkan one, so the runtime's code that reads
/// it compiles on every OS.
pub struct DriverBuffer {
    /// The wgpu view of it.
    pub buffer: wgpu::Buffer,
    _never: std::convert::Infallible,
}

impl DriverBuffer {
    /// Its size in bytes (unreachable: no value exists).
    pub fn size(&self) -> u64 {
        self.buffer.size()
    }
}

/// Never built here.
pub enum DriverGDeflate {}

impl DriverGDeflate {
    /// Always `None` here.
    pub fn new(_device: &wgpu::Device) -> Option<Self> {
        None
    }

    /// Unreachable: no value exists.
    pub fn extension(&self) -> DriverExtension {
        match *self {}
    }

    /// Unreachable: no value exists.
    pub fn buffer(&self, _size: u64, _label: &str) -> Result<DriverBuffer, String> {
        match *self {}
    }

    /// Unreachable: no value exists.
    pub fn record(
        &self,
        _src: &DriverBuffer,
        _dst: &DriverBuffer,
        _regions: &[DriverRegion],
    ) -> Result<wgpu::CommandBuffer, DriverRecordError> {
        match *self {}
    }
}
