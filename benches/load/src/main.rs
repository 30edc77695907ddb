//! `profcol-bench`: profcol measured from outside, as an operator sees it.
//!
//! - `run`: for each case and request size, in interleaved rounds, starts
//!   the system under test (the `profcol` binary with a generated config, or
//!   the naive proxy below) between a load generator and a counting sink of
//!   its own, and reads the process's CPU time and memory from `/proc`.
//!   Prints CPU per request, samples per CPU-second, latency and peak RSS,
//!   with profcol's figures as ratios to the naive proxy's.
//! - `naive`: the baseline, a proxy that decodes each OTLP request with
//!   prost and re-encodes it (tonic's generated server and client).
//! - `sink`, `load`: the two ends on their own, for manual runs.
//!
//! Not run by `cargo test`; see README "Benchmarks".

mod kafka;
mod load;
mod naive;
mod proc_stats;
mod requests;
mod run;
mod sink;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "profcol-bench", about = "End-to-end load bench for profcol")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Interleaved rounds of every case against profcol and the naive proxy.
    Run(run::Args),
    /// The naive decode/re-encode proxy.
    Naive {
        #[arg(long)]
        listen: String,
        #[arg(long)]
        forward: String,
        /// Compression of the forwarded requests: none, gzip, zstd.
        #[arg(long, default_value = "none")]
        compression: String,
    },
    /// A sink that counts requests and bytes (and samples with --decode).
    Sink {
        #[arg(long)]
        listen: String,
        #[arg(long)]
        decode: bool,
    },
    /// A load generator: N requests in flight for a while.
    Load(load::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match cli.command {
            Command::Run(a) => run::run(a).await,
            Command::Naive {
                listen,
                forward,
                compression,
            } => naive::serve(&listen, &forward, &compression).await,
            Command::Sink { listen, decode } => {
                let s = sink::Sink::start(&listen, decode).await?;
                println!("sink listening on {}", s.addr);
                tokio::signal::ctrl_c().await?;
                println!("{:?}", s.counts());
                Ok(())
            }
            Command::Load(a) => {
                let report = load::load(&a).await?;
                println!("{report}");
                Ok(())
            }
        }
    })
}
