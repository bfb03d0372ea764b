//! `storage-bench`: signed chat history as NIP-01 JSON lines on stdout — channels
//! created and joined, then messages, a fifth of them replies to earlier ones — the
//! input the README's import / export / copy figures were measured with:
//!
//! ```sh
//! target/release/storage-bench --events 1000000 > history.jsonl
//! target/release/buzz-relay import history.jsonl
//! ```
//!
//! For reads against one large community (`examples/stock-client/read-scale.mjs`) it
//! can also write community-wide rows: `--notes N` kind-1 notes with a `t` tag
//! (`topic0` … `topic<--topics − 1>`), spread evenly through the messages' month in
//! time and in the file, so a community-wide read walks past channel rows; `--profiles`
//! a kind-0 profile of every author; and `--keys-out PATH` the authors' secret keys
//! (hex, one a line, the first the owner of channel 0), so a reader can authenticate
//! as one of the members. Without these options the output is what it always was.

use buzz_nostr::keys::Keys;
use clap::Parser;
use std::io::Write;

#[derive(Parser)]
#[command(about = "Signed chat history as JSON lines (for import / export / copy figures)")]
struct Args {
    /// Messages to write (besides the channel creations and joins).
    #[arg(long, default_value_t = 1_000_000)]
    events: usize,
    /// Channels the messages are spread over.
    #[arg(long, default_value_t = 20)]
    channels: usize,
    /// Authors (each joins every channel).
    #[arg(long, default_value_t = 50)]
    authors: usize,
    /// Signing threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Community-wide kind-1 notes (no `h` tag), interleaved in time with the messages.
    #[arg(long, default_value_t = 0)]
    notes: usize,
    /// Distinct `t` tags the notes cycle through.
    #[arg(long, default_value_t = 20)]
    topics: usize,
    /// Also write a kind-0 profile of every author (after the channels' setup).
    #[arg(long)]
    profiles: bool,
    /// Write the authors' secret keys here (hex, one a line, in author order).
    #[arg(long)]
    keys_out: Option<std::path::PathBuf>,
}

fn tag(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    if args.notes > 0 && args.events == 0 {
        return Err(std::io::Error::other(
            "--notes needs --events > 0 to interleave with",
        ));
    }
    let authors: Vec<Keys> = (0..args.authors.max(1)).map(|_| Keys::generate()).collect();
    if let Some(path) = &args.keys_out {
        let keys: String = authors.iter().map(|k| k.secret_hex() + "\n").collect();
        std::fs::write(path, keys)?;
    }
    let channels: Vec<String> = (0..args.channels.max(1))
        .map(|_| uuid::Uuid::new_v4().to_string())
        .collect();
    // A month of history, one message every few seconds, oldest first.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    let start = now - 30 * 86_400;
    let step = (30 * 86_400 / args.events.max(1) as i64).max(1);
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out.lock());
    for (i, channel) in channels.iter().enumerate() {
        let owner = &authors[i % authors.len()];
        let create = owner.sign(
            9007,
            vec![
                tag(&["h", channel]),
                tag(&["name", &format!("channel {i}")]),
            ],
            "",
            start,
        );
        writeln!(out, "{}", create.to_json())?;
        for author in &authors {
            if author.pubkey() != owner.pubkey() {
                let join = author.sign(9021, vec![tag(&["h", channel])], "", start);
                writeln!(out, "{}", join.to_json())?;
            }
        }
    }
    if args.profiles {
        for (i, author) in authors.iter().enumerate() {
            let about = format!(r#"{{"name":"author {i}","about":"storage-bench author"}}"#);
            writeln!(out, "{}", author.sign(0, vec![], &about, start).to_json())?;
        }
    }
    // Note j goes right after message `floor(j * events / notes)`, half a step later in
    // time: the notes after message i are `first_note(i)..first_note(i + 1)`.
    let (events, notes, topics) = (args.events, args.notes, args.topics.max(1));
    let first_note = |i: usize| (i * notes).div_ceil(events.max(1));
    // Message i replies to message i - 7 (same channel) one time in five; the ids of
    // earlier messages are known because chunks are signed in order.
    let threads = args.threads.max(1);
    let chunk = 20_000;
    let mut ids: Vec<String> = Vec::with_capacity(args.events);
    let mut next = 0;
    while next < args.events {
        let end = (next + chunk).min(args.events);
        let per = (end - next).div_ceil(threads);
        let known = &ids;
        type Signed = (String, String, Vec<String>);
        let signed: Vec<Vec<Signed>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (from, to) = (next + t * per, (next + (t + 1) * per).min(end));
                    let (authors, channels) = (&authors, &channels);
                    s.spawn(move || {
                        (from..to)
                            .map(|i| {
                                let channel = &channels[i % channels.len()];
                                let author = &authors[i % authors.len()];
                                let mut tags = vec![tag(&["h", channel])];
                                let parent =
                                    i.checked_sub(7 * channels.len()).filter(|_| i % 5 == 0);
                                if let Some(p) = parent.and_then(|p| known.get(p)) {
                                    tags.push(tag(&["e", p, "", "root"]));
                                }
                                let at = start + 1 + i as i64 * step;
                                let e =
                                    author.sign(9, tags, &format!("message {i} in {channel}"), at);
                                let notes: Vec<String> = (first_note(i)..first_note(i + 1))
                                    .map(|j| {
                                        let topic = format!("topic{}", j % topics);
                                        let text = format!("note {j} about {topic}");
                                        let by = &authors[j % authors.len()];
                                        let t = vec![tag(&["t", &topic])];
                                        by.sign(1, t, &text, at + step / 2).to_json()
                                    })
                                    .collect();
                                (e.id.clone(), e.to_json(), notes)
                            })
                            .collect()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        for (id, json, notes) in signed.into_iter().flatten() {
            writeln!(out, "{json}")?;
            for note in notes {
                writeln!(out, "{note}")?;
            }
            ids.push(id);
        }
        next = end;
    }
    out.flush()
}
