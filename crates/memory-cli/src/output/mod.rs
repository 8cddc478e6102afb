//! What the command prints: JSON with the wire field names (`memory_core::types`), or text for people. Written to the writers
//! given (the terminal's, or the buffers a shared server answers with), so both paths print the same bytes.

use std::io::Write;
use std::time::Duration;

use memory_core::{GetResponse, RecallResponse, SearchResponse, Status, SyncReport};

fn print_json(out: &mut dyn Write, v: &impl serde::Serialize) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, v)?;
    writeln!(out)?;
    Ok(())
}

pub fn search(out: &mut dyn Write, err: &mut dyn Write, r: &SearchResponse, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(out, r);
    }
    for w in &r.warnings {
        writeln!(err, "warning: {w}")?;
    }
    if r.results.is_empty() {
        writeln!(out, "No results.")?;
        return Ok(());
    }
    for (i, hit) in r.results.iter().enumerate() {
        let lines = if hit.start_line == hit.end_line { format!("{}", hit.start_line) } else { format!("{}-{}", hit.start_line, hit.end_line) };
        writeln!(out, "{}. {}:{}  (score {:.3})", i + 1, hit.path, lines, hit.score)?;
        for line in hit.snippet.lines() {
            writeln!(out, "   {line}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

pub fn recall(out: &mut dyn Write, err: &mut dyn Write, r: &RecallResponse, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(out, r);
    }
    for w in &r.warnings {
        writeln!(err, "warning: {w}")?;
    }
    if r.mode.is_some() {
        if r.entries.is_empty() {
            writeln!(out, "No trigger matched ({} eligible entries with triggers).", r.candidates)?;
        }
        for e in &r.entries {
            writeln!(out, "{}  (score {:.3}, trigger \"{}\")", e.citation, e.score, e.trigger)?;
            writeln!(out, "   {}", e.text.trim())?;
        }
    }
    if !r.project_entries.is_empty() {
        writeln!(out, "Project memory:")?;
        for e in &r.project_entries {
            writeln!(out, "{}  ({})", e.citation, e.projects.join("; "))?;
            writeln!(out, "   {}", e.text.trim())?;
        }
    }
    Ok(())
}

pub fn get(out: &mut dyn Write, err: &mut dyn Write, r: &GetResponse, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(out, r);
    }
    if r.missing {
        writeln!(err, "note: {} does not exist yet", r.path)?;
        return Ok(());
    }
    if !r.text.is_empty() {
        writeln!(out, "{}", r.text)?;
    }
    if let Some(note) = &r.note {
        writeln!(err, "note: {note}")?;
    }
    Ok(())
}

pub fn status(out: &mut dyn Write, s: &Status, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(out, s);
    }
    writeln!(out, "Engine:     {}", s.backend)?;
    writeln!(out, "Workspace:  {}", s.workspace)?;
    if let Some(p) = &s.index_path {
        writeln!(out, "Index:      {p}")?;
    }
    writeln!(out, "Indexed:    {} files, {} chunks", s.files, s.chunks)?;
    let search = match (s.capabilities.keyword, s.capabilities.vector) {
        (true, true) => "hybrid (keyword + vector)",
        (true, false) => "keyword only",
        (false, true) => "vector only",
        _ => "none",
    };
    writeln!(out, "Search:     {search}")?;
    if let Some(p) = &s.provider {
        writeln!(out, "Embeddings: {p} {}", s.model.as_deref().unwrap_or(""))?;
    }
    if let Some(ms) = s.last_sync_ms {
        let ago = (memory_core::now_ms() - ms).max(0) / 1000;
        writeln!(out, "Last sync:  {ago} s ago")?;
    } else {
        writeln!(out, "Last sync:  never")?;
    }
    writeln!(out, "Fresh:      {}", if s.dirty { "no (files changed since the last sync; run `memory index`)" } else { "yes" })?;
    if let Some(f) = &s.fallback {
        writeln!(out, "Fallback:   answering instead of {}: {}", f.from, f.reason)?;
    }
    for w in &s.warnings {
        writeln!(out, "Warning:    {w}")?;
    }
    for f in &s.skipped {
        let again = if f.retried { "; tried again on every sync" } else { "; indexed once it changes" };
        writeln!(out, "Skipped:    {}: {}{again}", f.path, f.reason)?;
    }
    Ok(())
}

pub fn sync_report(out: &mut dyn Write, r: &SyncReport, took: Duration, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(out, r);
    }
    writeln!(
        out,
        "Indexed {} files in {:.2} s: {} added, {} changed, {} removed, {} unchanged, {} skipped; {} chunks written{}",
        r.files_scanned,
        took.as_secs_f64(),
        r.files_added,
        r.files_changed,
        r.files_removed,
        r.files_unchanged,
        r.files_skipped,
        r.chunks_written,
        if r.rebuilt { " (full rebuild)" } else { "" }
    )?;
    if r.chunks_embedded + r.embeddings_cached > 0 {
        writeln!(out, "Embeddings: {} computed, {} from cache", r.chunks_embedded, r.embeddings_cached)?;
    }
    if r.files_pending > 0 {
        writeln!(
            out,
            "Waiting for embeddings: {} files (found by their words meanwhile; the next sync that reaches the provider embeds them)",
            r.files_pending
        )?;
    }
    // Per-file warnings were already logged as they happened.
    Ok(())
}

mod explanation;
pub use explanation::explanation;
