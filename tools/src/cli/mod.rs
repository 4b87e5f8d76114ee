//! One module per subcommand of the `gpustream` binary.

pub mod adapters;
pub mod bench;
pub mod demo_pack;
pub mod devices;
pub mod env;
pub mod info;
pub mod logger;
pub mod pack;
#[cfg(target_os = "linux")]
pub mod remote;
pub mod replay;
pub mod report;
#[cfg(target_os = "linux")]
pub mod soak;
pub mod sweep;
pub mod unpack;
pub mod verify;

/// The error type the subcommands return: a message with its causes.
pub type CliResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The current UTC time as RFC 3339 (seconds), without a date crate.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}
