//! The Vulkan side of the driver's GDeflate decoder: opening a device with
//! the extension enabled, buffers the driver can address, and one raw
//! command buffer per batch of pages.
//!
//! wgpu 30 refuses to mix its own commands with raw ones in one encoder, so
//! [`DriverGDeflate::record`] returns a command buffer of its own. wgpu
//! tracks nothing in it: it opens and closes with a full memory barrier, so
//! whatever the application submits before it (the copy that fills the
//! source) is visible to the decoder, and whatever comes after (the copies
//! out of the destination) sees its writes.

use super::DeviceOpenError;
use super::{validate_regions, DriverExtension, DriverRecordError, DriverRegion};
use ash::vk;
use std::ffi::{c_void, CStr};
use wgpu::hal::api::Vulkan;

const EXT_NAME: &CStr = c"VK_EXT_memory_decompression";
const NV_NAME: &CStr = c"VK_NV_memory_decompression";
const MAINTENANCE5: &CStr = c"VK_KHR_maintenance5";
const BUFFER_DEVICE_ADDRESS: &CStr = c"VK_KHR_buffer_device_address";

// VK_EXT_memory_decompression is newer than the Vulkan headers of the ash
// release wgpu builds on; these are its values from the Vulkan registry.
const STRUCTURE_TYPE_DECOMPRESS_MEMORY_INFO_EXT: i32 = 1_000_550_002;
const BUFFER_USAGE_2_MEMORY_DECOMPRESSION_EXT: u64 = 1 << 32;
/// `VK_MEMORY_DECOMPRESSION_METHOD_GDEFLATE_1_0_BIT_{EXT,NV}`.
const GDEFLATE_1_0: u64 = 1;

/// `VkDecompressMemoryRegionEXT`.
#[repr(C)]
#[derive(Clone, Copy)]
struct RegionExt {
    src_address: u64,
    dst_address: u64,
    compressed_size: u64,
    decompressed_size: u64,
}

/// `VkDecompressMemoryInfoEXT`.
#[repr(C)]
struct InfoExt {
    s_type: vk::StructureType,
    p_next: *const c_void,
    decompression_method: u64,
    region_count: u32,
    p_regions: *const RegionExt,
}

/// `vkCmdDecompressMemoryEXT`.
type CmdDecompressMemoryExt = unsafe extern "system" fn(vk::CommandBuffer, *const InfoExt);

fn cname(e: DriverExtension) -> &'static CStr {
    match e {
        DriverExtension::Ext => EXT_NAME,
        DriverExtension::Nv => NV_NAME,
    }
}

/// Whether the driver offers extension `e` on `phys` with what gpustream
/// needs of it: the extension (and `VK_KHR_maintenance5` for EXT) listed,
/// Vulkan 1.2, and the `memoryDecompression`, `bufferDeviceAddress` (and
/// `maintenance5`) features and the GDeflate 1.0 method reported, so that
/// opening a device with them cannot be refused.
fn supported(instance: &ash::Instance, phys: vk::PhysicalDevice, e: DriverExtension) -> bool {
    // SAFETY: `phys` is a physical device of `instance` (both from the
    // same wgpu-hal adapter or device); the structures chained below live
    // across each call.
    unsafe {
        if instance.get_physical_device_properties(phys).api_version < vk::API_VERSION_1_2 {
            return false;
        }
        let Ok(listed) = instance.enumerate_device_extension_properties(phys) else {
            return false;
        };
        let has = |name: &CStr| {
            listed
                .iter()
                .any(|p| p.extension_name_as_c_str() == Ok(name))
        };
        let ext = e == DriverExtension::Ext;
        if !has(cname(e)) || (ext && !has(MAINTENANCE5)) {
            return false;
        }
        let mut decompression = vk::PhysicalDeviceMemoryDecompressionFeaturesNV::default();
        let mut addresses = vk::PhysicalDeviceBufferDeviceAddressFeatures::default();
        let mut maintenance5 = vk::PhysicalDeviceMaintenance5FeaturesKHR::default();
        let mut features = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut decompression)
            .push_next(&mut addresses);
        if ext {
            features = features.push_next(&mut maintenance5);
        }
        instance.get_physical_device_features2(phys, &mut features);
        let mut methods = vk::PhysicalDeviceMemoryDecompressionPropertiesNV::default();
        let mut properties = vk::PhysicalDeviceProperties2::default().push_next(&mut methods);
        instance.get_physical_device_properties2(phys, &mut properties);
        decompression.memory_decompression == vk::TRUE
            && addresses.buffer_device_address == vk::TRUE
            && (!ext || maintenance5.maintenance5 == vk::TRUE)
            && methods.decompression_methods.as_raw() & GDEFLATE_1_0 != 0
    }
}

/// Which extension `adapter`'s Vulkan driver offers for decoding GDeflate,
/// if any: `VK_EXT_memory_decompression` where `VK_KHR_maintenance5` comes
/// with it (its buffer usage flag needs that), else
/// `VK_NV_memory_decompression`; each only with the features and the
/// GDeflate method it needs (see `supported`). `None` on other backends.
/// (NVIDIA's drivers offer them; Mesa's do not.)
pub fn offered_extension(adapter: &wgpu::Adapter) -> Option<DriverExtension> {
    if adapter.get_info().backend != wgpu::Backend::Vulkan {
        return None;
    }
    // SAFETY: `as_hal` lends a read-only view of the adapter's Vulkan
    // handle for this scope; nothing is created, changed or kept through
    // it, and the guard is dropped before `adapter` can be.
    let hal = unsafe { adapter.as_hal::<Vulkan>() }?;
    first_supported(
        hal.shared_instance().raw_instance(),
        hal.raw_physical_device(),
    )
}

/// [`offered_extension`] for the adapter `device` was opened on, asked of
/// the driver through the device (the runtime sees no adapter).
pub fn offered_for_device(device: &wgpu::Device) -> Option<DriverExtension> {
    // SAFETY: a read-only view of the device's Vulkan handles for this
    // scope; the physical device's properties and extension list are read.
    let hal = unsafe { device.as_hal::<Vulkan>() }?;
    first_supported(
        hal.shared_instance().raw_instance(),
        hal.raw_physical_device(),
    )
}

/// The first of [`DriverExtension::ALL`] that `phys` supports with what
/// gpustream needs of it.
fn first_supported(instance: &ash::Instance, phys: vk::PhysicalDevice) -> Option<DriverExtension> {
    DriverExtension::ALL
        .into_iter()
        .find(|&e| supported(instance, phys, e))
}

/// Which of the extensions `device` was opened with, if any (the
/// application's device, or one from [`request_device`]).
pub fn enabled_extension(device: &wgpu::Device) -> Option<DriverExtension> {
    // SAFETY: a read-only view of the device's Vulkan handle for this
    // scope; only its list of enabled extensions is read.
    let hal = unsafe { device.as_hal::<Vulkan>() }?;
    let enabled = hal.enabled_device_extensions();
    DriverExtension::ALL
        .into_iter()
        .find(|&e| enabled.contains(&cname(e)))
}

/// Opens a device on `adapter` as `adapter.request_device(desc)` would,
/// with the Vulkan extensions the runtime uses where the driver offers
/// them:
///
/// - a GDeflate decoder (`offered_extension`), with its
///   `memoryDecompression` feature and buffer device addresses, so that
///   the runtime can decode GDeflate pages with it;
/// - `VK_EXT_external_memory_host`, so that the runtime's staging chunks
///   can be host memory it imports (`RuntimeConfig::import_staging_memory`).
///
/// Elsewhere it is exactly `request_device`.
pub fn request_device(
    adapter: &wgpu::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
) -> Result<(wgpu::Device, wgpu::Queue), DeviceOpenError> {
    let ext = offered_extension(adapter);
    let plain = || -> Result<(wgpu::Device, wgpu::Queue), DeviceOpenError> {
        Ok(pollster::block_on(adapter.request_device(desc))?)
    };
    if adapter.get_info().backend != wgpu::Backend::Vulkan {
        return plain();
    }
    // SAFETY: a view of the adapter's Vulkan handle, used only to open a
    // device on it below; the guard is dropped before this returns.
    let Some(hal) = (unsafe { adapter.as_hal::<Vulkan>() }) else {
        return plain();
    };
    let caps = hal.physical_device_capabilities();
    let host_memory = crate::staging::HOST_MEMORY_EXTENSION;
    let host = caps.supports_extension(host_memory);
    if ext.is_none() && !host {
        drop(hal);
        return plain();
    }
    let bda_listed = caps.supports_extension(BUFFER_DEVICE_ADDRESS);
    let mut decompression =
        vk::PhysicalDeviceMemoryDecompressionFeaturesNV::default().memory_decompression(true);
    let mut addresses =
        vk::PhysicalDeviceBufferDeviceAddressFeatures::default().buffer_device_address(true);
    let mut maintenance5 = vk::PhysicalDeviceMaintenance5FeaturesKHR::default().maintenance5(true);
    let (decompression, addresses, maintenance5) =
        (&mut decompression, &mut addresses, &mut maintenance5);
    let callback: Box<wgpu::hal::vulkan::CreateDeviceCallback<'_>> = Box::new(move |args| {
        if host && !args.extensions.contains(&host_memory) {
            args.extensions.push(host_memory);
        }
        let Some(ext) = ext else {
            return;
        };
        args.extensions.push(cname(ext));
        // wgpu enables buffer device addresses itself only for ray tracing;
        // a second feature structure for them would be invalid.
        let wgpu_has_addresses = args.extensions.contains(&BUFFER_DEVICE_ADDRESS);
        if !wgpu_has_addresses {
            if bda_listed {
                args.extensions.push(BUFFER_DEVICE_ADDRESS);
            }
            *args.create_info = args.create_info.push_next(addresses);
        }
        *args.create_info = args.create_info.push_next(decompression);
        if ext == DriverExtension::Ext && !args.extensions.contains(&MAINTENANCE5) {
            args.extensions.push(MAINTENANCE5);
            *args.create_info = args.create_info.push_next(maintenance5);
        }
    });
    // SAFETY: the callback only adds extensions the adapter lists
    // (`offered_extension` and `supports_extension` checked them) and
    // features they provide, and
    // removes nothing; the features and limits asked of wgpu are `desc`'s,
    // which `create_device_from_hal` checks against the adapter as
    // `request_device` would.
    let open = unsafe {
        hal.open_with_callback(
            desc.required_features,
            &desc.required_limits,
            &desc.memory_hints,
            Some(callback),
        )
    }
    .map_err(|e| DeviceOpenError::Vulkan {
        extension: ext.map_or("VK_EXT_external_memory_host", |e| e.name()),
        error: e.to_string(),
    })?;
    drop(hal);
    // SAFETY: `open` was created from this adapter's handle just above,
    // with `desc`'s features.
    Ok(unsafe { adapter.create_device_from_hal::<Vulkan>(open, desc) }?)
}

/// A buffer the driver's decoder can read from or write into: a device
/// address, the usage flag the extension asks for, and a wgpu buffer over
/// it (storage, copy source and destination) for the rest of the batch.
pub struct DriverBuffer {
    /// The wgpu view of it.
    pub buffer: wgpu::Buffer,
    address: u64,
}

impl DriverBuffer {
    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.buffer.size()
    }
}

/// The driver's GDeflate decoder on one device.
pub struct DriverGDeflate {
    extension: DriverExtension,
    /// Keeps the Vulkan device alive as long as the function table below.
    device: wgpu::Device,
    raw: ash::Device,
    memory: vk::PhysicalDeviceMemoryProperties,
    ext_fn: Option<CmdDecompressMemoryExt>,
    nv: Option<ash::nv::memory_decompression::Device>,
}

impl DriverGDeflate {
    /// The driver's decoder on `device`, where `device` was opened with one
    /// of the extensions enabled ([`request_device`]); `None` elsewhere.
    pub fn new(device: &wgpu::Device) -> Option<Self> {
        let extension = enabled_extension(device)?;
        // SAFETY: a view of the device's Vulkan handles for this scope. The
        // function table cloned out of it stays valid while `device` (kept
        // below) keeps the VkDevice alive.
        let hal = unsafe { device.as_hal::<Vulkan>() }?;
        let instance = hal.shared_instance().raw_instance();
        let raw = hal.raw_device().clone();
        // SAFETY: the physical device is the one `device` was opened on.
        let memory =
            unsafe { instance.get_physical_device_memory_properties(hal.raw_physical_device()) };
        let (ext_fn, nv) = match extension {
            DriverExtension::Ext => {
                // SAFETY: the name is a valid C string of a device command
                // of an extension the device enabled.
                let f = unsafe {
                    instance
                        .get_device_proc_addr(raw.handle(), c"vkCmdDecompressMemoryEXT".as_ptr())
                }?;
                // SAFETY: the loader returned `vkCmdDecompressMemoryEXT`,
                // whose C signature `CmdDecompressMemoryExt` spells.
                let f: CmdDecompressMemoryExt = unsafe { std::mem::transmute(f) };
                (Some(f), None)
            }
            DriverExtension::Nv => (
                None,
                Some(ash::nv::memory_decompression::Device::new(instance, &raw)),
            ),
        };
        drop(hal);
        Some(Self {
            extension,
            device: device.clone(),
            raw,
            memory,
            ext_fn,
            nv,
        })
    }

    /// The extension it runs through.
    pub fn extension(&self) -> DriverExtension {
        self.extension
    }

    /// A device-local buffer of `size` bytes the decoder can address.
    pub fn buffer(&self, size: u64, label: &str) -> Result<DriverBuffer, String> {
        let size = size.max(256).next_multiple_of(4);
        let usage = vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST
            | vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::SHADER_DEVICE_ADDRESS;
        let mut usage2 = vk::BufferUsageFlags2CreateInfoKHR::default().usage(
            vk::BufferUsageFlags2KHR::from_raw(
                u64::from(usage.as_raw()) | BUFFER_USAGE_2_MEMORY_DECOMPRESSION_EXT,
            ),
        );
        let mut info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        if self.extension == DriverExtension::Ext {
            // The EXT's usage bit only exists as a 64-bit flag.
            info = info.push_next(&mut usage2);
        }
        let raw = &self.raw;
        // SAFETY: a valid create info for this device; the handle is
        // destroyed below on failure or by the drop callback.
        let buffer = unsafe { raw.create_buffer(&info, None) }.map_err(|e| e.to_string())?;
        // SAFETY: `buffer` was created on `raw` just above.
        let req = unsafe { raw.get_buffer_memory_requirements(buffer) };
        // Device-local memory the host cannot see first (the GPU's own
        // memory, not a BAR window), then any device-local type.
        let fits = |i: u32, avoid: vk::MemoryPropertyFlags| {
            let flags = self.memory.memory_types[i as usize].property_flags;
            req.memory_type_bits & (1 << i) != 0
                && flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
                && !flags.intersects(avoid)
        };
        let count = self.memory.memory_type_count;
        let kind = (0..count)
            .find(|&i| fits(i, vk::MemoryPropertyFlags::HOST_VISIBLE))
            .or_else(|| (0..count).find(|&i| fits(i, vk::MemoryPropertyFlags::empty())));
        let Some(kind) = kind else {
            // SAFETY: unused and never handed out.
            unsafe { raw.destroy_buffer(buffer, None) };
            return Err("no device-local memory type fits the buffer".into());
        };
        let mut flags =
            vk::MemoryAllocateFlagsInfo::default().flags(vk::MemoryAllocateFlags::DEVICE_ADDRESS);
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(kind)
            .push_next(&mut flags);
        // SAFETY: a valid allocate info; freed by the drop callback.
        let memory = match unsafe { raw.allocate_memory(&alloc, None) } {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: unused and never handed out.
                unsafe { raw.destroy_buffer(buffer, None) };
                return Err(format!("allocating {} bytes: {e}", req.size));
            }
        };
        // SAFETY: fresh buffer and memory of a fitting type and size.
        let bound = unsafe { raw.bind_buffer_memory(buffer, memory, 0) };
        let free = {
            let raw = raw.clone();
            move || {
                // SAFETY: wgpu calls this once, when its buffer is dropped
                // and the GPU no longer uses it; the VkDevice outlives
                // every buffer of its own.
                unsafe {
                    raw.destroy_buffer(buffer, None);
                    raw.free_memory(memory, None);
                }
            }
        };
        if let Err(e) = bound {
            free();
            return Err(format!("binding memory: {e}"));
        }
        // SAFETY: the buffer has bound memory and SHADER_DEVICE_ADDRESS
        // usage; the feature was enabled with the extension.
        let address = unsafe {
            raw.get_buffer_device_address(&vk::BufferDeviceAddressInfo::default().buffer(buffer))
        };
        // SAFETY: wgpu takes the handle but not its lifetime: the callback
        // destroys both once wgpu drops the buffer.
        let hal =
            unsafe { wgpu::hal::vulkan::Buffer::from_raw_externally_owned(buffer, Box::new(free)) };
        // SAFETY: created on this device's handle with the usages the
        // descriptor names (storage, copy source, copy destination), not
        // mapped, size not zero. wgpu counts its bytes as initialised; no
        // pass reads a range of it before a copy or the decoder wrote it.
        let buffer = unsafe {
            self.device.create_buffer_from_hal::<Vulkan>(
                hal,
                &wgpu::BufferDescriptor {
                    label: Some(label),
                    size,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                },
            )
        };
        Ok(DriverBuffer { buffer, address })
    }

    /// One command buffer that decodes `regions` from `src` into `dst`
    /// with the driver's decoder, between two full memory barriers. Submit
    /// it after whatever fills `src` and before whatever reads `dst`.
    pub fn record(
        &self,
        src: &DriverBuffer,
        dst: &DriverBuffer,
        regions: &[DriverRegion],
    ) -> Result<wgpu::CommandBuffer, DriverRecordError> {
        validate_regions(regions, src.size(), dst.size())?;
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gpustream driver GDeflate"),
            });
        if regions.is_empty() {
            return Ok(enc.finish());
        }
        let barrier = vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::MEMORY_WRITE)
            .dst_access_mask(vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE);
        let all = vk::PipelineStageFlags::ALL_COMMANDS;
        // SAFETY: wgpu lends the encoder's command buffer in the recording
        // state; nothing else records into it meanwhile, and it is neither
        // ended nor destroyed here. Every region was checked above to lie in
        // its buffer with the extension's alignment and size rules, and
        // both buffers live until the submission completes (their owner
        // keeps them past the batch). The extension and its feature are
        // enabled (`enabled_extension` found it on this device).
        let recorded = unsafe {
            enc.as_hal_mut::<Vulkan, _, _>(|hal| {
                let Some(hal) = hal else { return false };
                let cb = hal.raw_handle();
                let raw = &self.raw;
                raw.cmd_pipeline_barrier(
                    cb,
                    all,
                    all,
                    vk::DependencyFlags::empty(),
                    &[barrier],
                    &[],
                    &[],
                );
                match (self.ext_fn, &self.nv) {
                    (Some(f), _) => {
                        let list: Vec<RegionExt> = regions
                            .iter()
                            .map(|r| RegionExt {
                                src_address: src.address + r.src_offset,
                                dst_address: dst.address + r.dst_offset,
                                compressed_size: r.src_size,
                                decompressed_size: r.dst_size,
                            })
                            .collect();
                        let info = InfoExt {
                            s_type: vk::StructureType::from_raw(
                                STRUCTURE_TYPE_DECOMPRESS_MEMORY_INFO_EXT,
                            ),
                            p_next: std::ptr::null(),
                            decompression_method: GDEFLATE_1_0,
                            region_count: list.len() as u32,
                            p_regions: list.as_ptr(),
                        };
                        f(cb, &info);
                    }
                    (None, Some(nv)) => {
                        let list: Vec<vk::DecompressMemoryRegionNV> = regions
                            .iter()
                            .map(|r| vk::DecompressMemoryRegionNV {
                                src_address: src.address + r.src_offset,
                                dst_address: dst.address + r.dst_offset,
                                compressed_size: r.src_size,
                                decompressed_size: r.dst_size,
                                decompression_method:
                                    vk::MemoryDecompressionMethodFlagsNV::from_raw(GDEFLATE_1_0),
                            })
                            .collect();
                        nv.cmd_decompress_memory(cb, &list);
                    }
                    (None, None) => return false,
                }
                raw.cmd_pipeline_barrier(
                    cb,
                    all,
                    all,
                    vk::DependencyFlags::empty(),
                    &[barrier],
                    &[],
                    &[],
                );
                true
            })
        };
        if !recorded {
            return Err(DriverRecordError::NoEncoder);
        }
        Ok(enc.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written EXT structures match the C layout the registry
    /// gives (four 64-bit fields; sType, pNext, a 64-bit flag, a count and
    /// a pointer).
    #[test]
    fn ext_structures_have_the_c_layout() {
        assert_eq!(std::mem::size_of::<RegionExt>(), 32);
        assert_eq!(std::mem::offset_of!(InfoExt, decompression_method), 16);
        assert_eq!(std::mem::offset_of!(InfoExt, region_count), 24);
        assert_eq!(std::mem::offset_of!(InfoExt, p_regions), 32);
        assert_eq!(std::mem::size_of::<InfoExt>(), 40);
    }
}
