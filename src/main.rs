//! The `contactlab` binary: the desktop app (behind the default `viewer` feature; no
//! subcommand opens it on the default scene) and headless subcommands (`src/cli/`).

mod cli;

fn main() -> anyhow::Result<()> {
    cli::run()
}
