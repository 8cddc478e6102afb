//! `memory man`: the manual pages, generated from the clap definitions so they never drift from `--help`.
//! memory(1) lists every subcommand; `--out-dir` also writes one page per visible subcommand
//! (memory-search(1), memory-server-start(1), ...), as packagers install them.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::Cli;

/// The top-level command as the pages describe it: named `memory` with its long version.
pub(crate) fn command() -> clap::Command {
    Cli::command()
}

/// memory(1) as roff.
pub(crate) fn render_main() -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(command()).render(&mut out).context("cannot render the manual page")?;
    Ok(out)
}

/// Every page: (file name, roff) for memory.1 and each visible subcommand at any depth.
pub(crate) fn render_all() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut cmd = command();
    // Subcommands inherit the global flags and the version only once the tree is built.
    cmd.build();
    let mut pages = vec![("memory.1".to_string(), render_main()?)];
    add_subcommands(&cmd, "memory", "memory", &mut pages)?;
    Ok(pages)
}

/// `page` names the pages (`memory-server`), `typed` the command as typed (`memory server`).
fn add_subcommands(cmd: &clap::Command, page: &str, typed: &str, pages: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        let name = format!("{page}-{}", sub.get_name());
        let bin = format!("{typed} {}", sub.get_name());
        // The page's title is its file name; the synopsis shows the command as typed (`memory server start`).
        let man = sub.clone().name(&name).bin_name(&bin);
        let mut out = Vec::new();
        clap_mangen::Man::new(man).render(&mut out).with_context(|| format!("cannot render the page {name}"))?;
        pages.push((format!("{name}.1"), out));
        add_subcommands(sub, &name, &bin, pages)?;
    }
    Ok(())
}

pub(crate) fn run(out_dir: Option<&Path>) -> anyhow::Result<()> {
    let Some(dir) = out_dir else {
        return std::io::stdout().write_all(&render_main()?).context("cannot write the manual page");
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (file, roff) in render_all()? {
        let path = dir.join(&file);
        std::fs::write(&path, roff).with_context(|| format!("cannot write {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}
