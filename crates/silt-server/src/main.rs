//! `silt-server`: one node of the replicated key-value service per process
//! (`silt-server --help`; the three-node quick start is in README.md).

use clap::Parser;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cfg = silt_server::Config::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("silt-server: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(silt_server::run(cfg)) {
        eprintln!("silt-server: {e}");
        std::process::exit(1);
    }
}
