//! The environment variables the `gpustream` tool reads for its commands.
//! The library reads none: an application configures the runtime in
//! code, and these are this tool's switches, read here and written into the
//! configuration it builds.
//!
//! - `GPUSTREAM_IO=auto|io_uring|threads`: the I/O backend
//!   (`IoConfig::backend`), for checking a result with the thread pool
//!   where io_uring is available;
//! - `GPUSTREAM_GDEFLATE_DECODER=wgsl|driver`: which GDeflate decoder a
//!   runtime prefers (`RuntimeConfig::gdeflate_decoder`), so a decoder can be
//!   picked without a flag on every command.
//!
//! A value that does not parse is an error naming the variable, never
//! ignored.

use gpustream::decode::gpu::GDeflateDecoderPreference;
use gpustream::io::IoConfig;
use gpustream::runtime::RuntimeConfig;

/// The I/O backend variable.
pub const IO: &str = "GPUSTREAM_IO";
/// The GDeflate decoder variable.
pub const GDEFLATE_DECODER: &str = "GPUSTREAM_GDEFLATE_DECODER";

/// The variable `name`, if set and not empty.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `IoConfig::default()` with the backend `GPUSTREAM_IO` names.
pub fn io_config() -> Result<IoConfig, String> {
    let mut c = IoConfig::default();
    if let Some(v) = var(IO) {
        c.backend = v.parse().map_err(|e| format!("{IO}: {e}"))?;
    }
    Ok(c)
}

/// The GDeflate decoder `GPUSTREAM_GDEFLATE_DECODER` names, else the
/// default; with where the answer came from, for the tool's reports.
pub fn gdeflate_decoder() -> Result<(GDeflateDecoderPreference, &'static str), String> {
    match var(GDEFLATE_DECODER) {
        Some(v) => GDeflateDecoderPreference::parse(&v)
            .map(|p| (p, "set by GPUSTREAM_GDEFLATE_DECODER"))
            .map_err(|e| format!("{GDEFLATE_DECODER}: {e}")),
        None => Ok((GDeflateDecoderPreference::default(), "the default")),
    }
}

/// `RuntimeConfig::default()` with both variables applied.
pub fn runtime_config() -> Result<RuntimeConfig, String> {
    Ok(RuntimeConfig::default()
        .with_io(io_config()?)
        .with_gdeflate_decoder(gdeflate_decoder()?.0))
}
