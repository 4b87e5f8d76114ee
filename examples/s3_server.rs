//! A local S3 server for trying packs in object storage: `s3s-fs` (S3 over
//! a directory, one folder per bucket) on 127.0.0.1, uploading the given
//! files first. The object-storage benchmark in docs/results.md runs
//! against it:
//!
//! ```text
//! cargo run --release --example s3_server -- /var/tmp/s3 9000 packs/level.gspk=target/level.gspk
//! AWS_ACCESS_KEY_ID=gpustream AWS_SECRET_ACCESS_KEY=gpustream-secret \
//!   gpustream bench --pack s3://packs/level.gspk --endpoint http://127.0.0.1:9000
//! ```
//!
//! It serves until killed. Credentials: the key id `gpustream`, the secret
//! `gpustream-secret`.

#[cfg(target_os = "linux")]
use gpustream_tools::s3;

#[cfg(target_os = "linux")]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: s3_server ROOT PORT [BUCKET/KEY=FILE ...]";
    let (Some(root), Some(port)) = (args.first(), args.get(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let root = std::path::PathBuf::from(root);
    let port: u16 = port.parse().unwrap_or_else(|_| {
        eprintln!("{usage}");
        std::process::exit(2)
    });
    std::fs::create_dir_all(&root).expect("creating the root folder");
    let server = s3::S3Server::start(&root, port, 2).unwrap_or_else(|e| {
        eprintln!("cannot serve {} on port {port}: {e}", root.display());
        std::process::exit(1)
    });
    for a in &args[2..] {
        let Some((object, file)) = a.split_once('=') else {
            eprintln!("{usage}");
            std::process::exit(2);
        };
        let Some((bucket, key)) = object.split_once('/') else {
            eprintln!("{object}: expected BUCKET/KEY");
            std::process::exit(2);
        };
        std::fs::create_dir_all(root.join(bucket)).expect("creating the bucket's folder");
        let bytes = std::fs::read(file).unwrap_or_else(|e| {
            eprintln!("{file}: {e}");
            std::process::exit(1)
        });
        s3::put_object(&server.endpoint(), bucket, key, bytes).expect("upload to the S3 server");
        println!("uploaded {file} as s3://{bucket}/{key}");
    }
    println!(
        "serving {} at {} (key id {}, secret {})",
        root.display(),
        server.endpoint(),
        s3::ACCESS_KEY.0,
        s3::ACCESS_KEY.1
    );
    loop {
        std::thread::park();
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the S3 server example runs on Linux");
}
