//! Staging chunks in the application's own memory, imported into Vulkan
//! (`VK_EXT_external_memory_host`), where the device was opened with that
//! extension.
//!
//! Why: wgpu gives `MAP_WRITE` buffers gpu-allocator's `CpuToGpu` memory,
//! which on a GPU with a large BAR (every current discrete GPU with ReBAR,
//! an H100) is VRAM behind the BAR, mapped write-combined. The CPU writes it
//! slowly, reads it back slower still, and O_DIRECT cannot DMA into it (the
//! kernel cannot pin such pages). Page-aligned anonymous memory imported
//! into Vulkan is ordinary cached host memory: O_DIRECT reads land in it by
//! DMA, and the GPU pulls it by DMA in the chunk's copy to the batch input.
//! Others measured the same trade: DirectStorage's BulkLoadDemo under
//! vkd3d-proton doubled its rate once upload buffers left ReBAR VRAM.
//!
//! wgpu cannot map a buffer made this way, and need not: the ring keeps the
//! memory's address for the chunk's whole life and reuses the chunk as soon
//! as its copy is done.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use ash::vk;
use wgpu::hal::api::Vulkan;

/// The extension that lets Vulkan use memory the application allocated.
pub(crate) const EXTENSION: &std::ffi::CStr = ash::ext::external_memory_host::NAME;

/// One staging chunk of imported host memory: a wgpu buffer (copy source)
/// over it, and the memory's address, valid as long as the buffer.
pub(crate) struct ImportedChunk {
    pub buffer: wgpu::Buffer,
    pub ptr: NonNull<u8>,
    /// Whether the memory type Vulkan imported it as is host-cached.
    pub cached: bool,
    /// The mapping `ptr` points into, shared with wgpu's drop callback:
    /// whichever goes last unmaps it. wgpu destroys every buffer of a lost
    /// device at once (a destroyed device, a driver reset), while reads
    /// and decode threads may still be writing the slots they were handed;
    /// the ring keeps this until its chunks go, so those writes land in
    /// memory that is still ours.
    pub mapping: Arc<dyn Send + Sync>,
}

/// Whether `device` was opened with [`EXTENSION`] enabled (Vulkan only).
pub(crate) fn enabled(device: &wgpu::Device) -> bool {
    // SAFETY: a read-only view of the device's Vulkan handle for this
    // scope; only its list of enabled extensions is read.
    unsafe { device.as_hal::<Vulkan>() }
        .is_some_and(|hal| hal.enabled_device_extensions().contains(&EXTENSION))
}

/// An anonymous mapping, unmapped on drop unless handed on.
struct Anon {
    ptr: NonNull<u8>,
    len: usize,
}

impl Anon {
    fn new(len: usize) -> Result<Anon, String> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mapping {len} bytes of host memory: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Anon {
            ptr: NonNull::new(p.cast()).ok_or("mmap returned null")?,
            len,
        })
    }
}

impl Drop for Anon {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of `len` bytes, unused now.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: the mapping is plain memory owned by this value alone.
unsafe impl Send for Anon {}
// SAFETY: as above; `Anon` itself hands out no references.
unsafe impl Sync for Anon {}

/// A chunk of `size` bytes (a multiple of 4 KiB) of anonymous host memory,
/// imported into `device`'s Vulkan device as a copy-source buffer.
pub(crate) fn import(
    device: &wgpu::Device,
    size: u64,
    label: &str,
) -> Result<ImportedChunk, String> {
    // SAFETY: a view of the device's Vulkan handles for this scope; the
    // buffer and memory made with them are destroyed by the drop callback
    // wgpu runs when its buffer goes, while the device still lives.
    let hal = unsafe { device.as_hal::<Vulkan>() }.ok_or("not a Vulkan device")?;
    if !hal.enabled_device_extensions().contains(&EXTENSION) {
        return Err("the device was not opened with VK_EXT_external_memory_host".into());
    }
    let instance = hal.shared_instance().raw_instance();
    let raw = hal.raw_device().clone();
    let phys = hal.raw_physical_device();
    // SAFETY: the physical device `device` was opened on.
    let (props, align) = unsafe {
        let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut host);
        instance.get_physical_device_properties2(phys, &mut p2);
        (
            instance.get_physical_device_memory_properties(phys),
            host.min_imported_host_pointer_alignment.max(4096),
        )
    };
    let len = size.next_multiple_of(align);
    let anon = Arc::new(Anon::new(len as usize)?);
    let ext = ash::ext::external_memory_host::Device::new(instance, &raw);
    let handle = vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;
    let mut host_props = vk::MemoryHostPointerPropertiesEXT::default();
    // SAFETY: the pointer is a live mapping of `len` bytes, aligned to the
    // device's minimum for imports.
    let r = unsafe {
        (ext.fp().get_memory_host_pointer_properties_ext)(
            raw.handle(),
            handle,
            anon.ptr.as_ptr() as *const c_void,
            &mut host_props,
        )
    };
    if r != vk::Result::SUCCESS {
        return Err(format!("vkGetMemoryHostPointerPropertiesEXT: {r}"));
    }
    let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle);
    let info = vk::BufferCreateInfo::default()
        .size(len)
        .usage(vk::BufferUsageFlags::TRANSFER_SRC)
        .sharing_mode(vk::SharingMode::EXCLUSIVE)
        .push_next(&mut external);
    // SAFETY: a valid create info for this device; destroyed below on
    // failure or by the drop callback.
    let buffer = unsafe { raw.create_buffer(&info, None) }.map_err(|e| e.to_string())?;
    // SAFETY: `buffer` was created on `raw` just above.
    let req = unsafe { raw.get_buffer_memory_requirements(buffer) };
    let bits = req.memory_type_bits & host_props.memory_type_bits;
    let flags = |i: u32| props.memory_types[i as usize].property_flags;
    let types = 0..props.memory_type_count;
    // Host-cached first: reads the CPU makes of it stay cheap.
    let kind = types
        .clone()
        .filter(|&i| bits & (1 << i) != 0)
        .find(|&i| flags(i).contains(vk::MemoryPropertyFlags::HOST_CACHED))
        .or_else(|| types.clone().find(|&i| bits & (1 << i) != 0));
    let Some(kind) = kind else {
        // SAFETY: unused and never handed out.
        unsafe { raw.destroy_buffer(buffer, None) };
        return Err("no memory type takes imported host memory for a buffer".into());
    };
    let mut import = vk::ImportMemoryHostPointerInfoEXT::default()
        .handle_type(handle)
        .host_pointer(anon.ptr.as_ptr().cast());
    let alloc = vk::MemoryAllocateInfo::default()
        .allocation_size(len)
        .memory_type_index(kind)
        .push_next(&mut import);
    // SAFETY: a valid import of a live, aligned mapping of `len` bytes,
    // which outlives the memory object (the drop callback frees the memory
    // before the mapping goes).
    let memory = match unsafe { raw.allocate_memory(&alloc, None) } {
        Ok(m) => m,
        Err(e) => {
            // SAFETY: unused and never handed out.
            unsafe { raw.destroy_buffer(buffer, None) };
            return Err(format!("importing {len} bytes of host memory: {e}"));
        }
    };
    let ptr = anon.ptr;
    let mapping: Arc<dyn Send + Sync> = anon.clone();
    let free = {
        let raw = raw.clone();
        move || {
            // SAFETY: wgpu calls this once, when its buffer is dropped and
            // the GPU no longer uses it; the VkDevice outlives every buffer
            // of its own. The mapping goes after the memory that imported
            // it, and only once the ring's share of it is gone too.
            unsafe {
                raw.destroy_buffer(buffer, None);
                raw.free_memory(memory, None);
            }
            drop(anon);
        }
    };
    // SAFETY: fresh buffer and memory of a fitting type and size.
    if let Err(e) = unsafe { raw.bind_buffer_memory(buffer, memory, 0) } {
        free();
        return Err(format!("binding imported memory: {e}"));
    }
    drop(hal);
    // SAFETY: wgpu takes the handle but not its lifetime: the callback
    // destroys the buffer, frees the memory and unmaps it once wgpu drops
    // the buffer.
    let hal_buffer =
        unsafe { wgpu::hal::vulkan::Buffer::from_raw_externally_owned(buffer, Box::new(free)) };
    // SAFETY: created on this device's handle with the one usage the
    // descriptor names (copy source), not mapped, size not zero. wgpu
    // counts its bytes as initialised: they are (anonymous memory is
    // zeroed), and every copy out of it covers bytes a read wrote.
    let buffer = unsafe {
        device.create_buffer_from_hal::<Vulkan>(
            hal_buffer,
            &wgpu::BufferDescriptor {
                label: Some(label),
                size: len,
                usage: wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            },
        )
    };
    Ok(ImportedChunk {
        buffer,
        ptr,
        cached: flags(kind).contains(vk::MemoryPropertyFlags::HOST_CACHED),
        mapping,
    })
}
