//! Where log events go. The terminal is for lockbench's own warnings and errors (more with
//! `-v`, or what `RUST_LOG` asks); every crate's events (client libraries included) go to the
//! current run's `<out>/logs/lockbench.log`, beside the servers' and workers' logs.
//!
//! One process runs many runs in a row (`compare`, sweeps), so the log file is a global that
//! each run points at its own folder with [`RunLog::start`] and that its guard resets. Events
//! while no run is under way reach the terminal only if they are lockbench's own: library
//! noise between runs is dropped. A worker process logs everything to its stderr, which its
//! coordinator already sends to the run's `logs/worker-K.log`.
//!
//! Every output is redacted ([`redact`]): a client library's statement log (sqlx at debug)
//! would otherwise print the passwords of `CREATE USER … IDENTIFIED BY '…'` and `CREATE ROLE …
//! PASSWORD '…'`. Redacting here, not per connection, holds for every statement and crate. Log
//! files name the servers' addresses, so they are created private ([`create_private`]).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use tracing::subscriber::Interest;
use tracing::{Metadata, span};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The name of a run's log file, in its `logs/` folder.
pub const RUN_LOG_FILE: &str = "lockbench.log";

/// What the terminal shows by `-v` count (`RUST_LOG` replaces it).
fn terminal_filter(verbose: u8) -> &'static str {
    match verbose {
        0 => "lockbench=warn",
        // sqlx warns about every connection a stopped server closed.
        1 => "lockbench=info,warn,sqlx=error",
        _ => "lockbench=debug,info",
    }
}

/// What a run's log file (and a worker's stderr) keeps: every crate's info, lockbench's debug
/// (rare: retries and lost leases) and the adapters' stderr; every crate's debug with `-vv`.
fn file_filter(verbose: u8) -> &'static str {
    match verbose {
        0 | 1 => "info,lockbench=debug,adapter=debug",
        _ => "debug",
    }
}

/// Where the events of this process go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The coordinator: the terminal, and the file of the run under way.
    Terminal,
    /// A worker process: everything to stderr (its log file); `RUST_LOG`, which it inherits,
    /// replaces the file's filter.
    WorkerStderr,
}

/// Installs the global subscriber once; later calls do nothing.
pub fn init(verbose: u8, output: Output) {
    let from_env_or = |default| {
        Fresh(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)))
    };
    let _ = match output {
        Output::Terminal => {
            let terminal = from_env_or(terminal_filter(verbose));
            tracing_subscriber::registry()
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_writer(Redacted(io::stderr))
                        .with_ansi(io::stderr().is_terminal())
                        .with_filter(terminal),
                )
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_writer(Redacted(CurrentRunLog))
                        .with_ansi(false)
                        .with_filter(Fresh(EnvFilter::new(file_filter(verbose)))),
                )
                .try_init()
        }
        Output::WorkerStderr => tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(Redacted(io::stderr))
                    .with_ansi(false)
                    .with_filter(from_env_or(file_filter(verbose))),
            )
            .try_init(),
    };
}

/// A per-layer filter that asks every time. tracing-subscriber hands each layer's verdict
/// from `enabled` to `on_event` through a thread-local; a callsite both filters accept is cached
/// as `always` and skips `enabled`, so it reads what the previous check left there. sqlx checks
/// `log_enabled!` after every query (nobody wants it: "disabled" stays), and the next lockbench
/// event vanished from both outputs (tokio-rs/tracing#2519). Capping the interest at
/// `sometimes` makes every event run `enabled` first.
struct Fresh(EnvFilter);

impl<S> Filter<S> for Fresh {
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        Filter::<S>::enabled(&self.0, meta, cx)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        let interest = Filter::<S>::callsite_enabled(&self.0, meta);
        if interest.is_always() {
            Interest::sometimes()
        } else {
            interest
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Filter::<S>::max_level_hint(&self.0)
    }

    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, cx: Context<'_, S>) {
        Filter::<S>::on_new_span(&self.0, attrs, id, cx)
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, cx: Context<'_, S>) {
        Filter::<S>::on_record(&self.0, id, values, cx)
    }

    fn on_enter(&self, id: &span::Id, cx: Context<'_, S>) {
        Filter::<S>::on_enter(&self.0, id, cx)
    }

    fn on_exit(&self, id: &span::Id, cx: Context<'_, S>) {
        Filter::<S>::on_exit(&self.0, id, cx)
    }

    fn on_close(&self, id: span::Id, cx: Context<'_, S>) {
        Filter::<S>::on_close(&self.0, id, cx)
    }
}

/// The log file of the run under way, if any.
static CURRENT: RwLock<Option<Arc<File>>> = RwLock::new(None);

fn current() -> Option<Arc<File>> {
    CURRENT.read().unwrap_or_else(|e| e.into_inner()).clone()
}

fn set_current(file: Option<Arc<File>>) {
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = file;
}

/// Guard of a run's log file: events go to `<logs>/lockbench.log` until it drops.
#[must_use = "the run's log file is used only while its guard lives"]
pub struct RunLog {
    file: Arc<File>,
    path: PathBuf,
}

impl RunLog {
    /// Creates (or truncates) `<logs>/lockbench.log` and sends every event there. Runs are
    /// expected one at a time: a run started while another logs takes the file over.
    pub fn start(logs: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(logs)?;
        let path = logs.join(RUN_LOG_FILE);
        let file = Arc::new(create_private(&path)?);
        set_current(Some(file.clone()));
        Ok(Self { file, path })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunLog {
    /// Stops sending events to the file, unless a later run has taken it over.
    fn drop(&mut self) {
        let mut current = CURRENT.write().unwrap_or_else(|e| e.into_inner());
        if current.as_ref().is_some_and(|f| Arc::ptr_eq(f, &self.file)) {
            *current = None;
        }
    }
}

/// Writes to the current run's log file, or nowhere between runs.
struct CurrentRunLog;

/// One event's bytes, to the file that was current when the event began.
struct EventWriter(Option<Arc<File>>);

impl<'a> MakeWriter<'a> for CurrentRunLog {
    type Writer = EventWriter;

    fn make_writer(&'a self) -> Self::Writer {
        EventWriter(current())
    }
}

impl Write for EventWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.0 {
            // Unbuffered: the formatter hands over one event per write, and a crash loses
            // nothing already logged.
            Some(f) => (&**f).write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Creates (or truncates) `path` readable by its owner only (mode 0600), also when it
/// existed with a wider mode: logs and results that name the servers' addresses.
pub fn create_private(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// The SQL words a password follows, in any case: MariaDB's `IDENTIFIED BY '…'` (and
/// `PASSWORD('…')`), PostgreSQL's `PASSWORD '…'`.
const PASSWORD_WORDS: [&str; 2] = ["identified by", "password"];

/// `text` with every quoted string after a [`PASSWORD_WORDS`] word replaced by `'***'`. A
/// quote doubled or after a backslash is inside the string; a string never closed (a log
/// line cut short) is redacted to its end.
pub fn redact(text: &str) -> Cow<'_, str> {
    let lower = text.to_ascii_lowercase();
    let mut out = String::new();
    let mut done = 0; // bytes of `text` already in `out`
    let mut at = 0;
    while let Some((word_end, quote)) = next_password(&lower, at) {
        let end = closing_quote(text.as_bytes(), word_end + 1, quote);
        out.push_str(&text[done..=word_end]);
        out.push_str("***");
        match end {
            Some(end) => {
                out.push(quote as char);
                done = end + 1;
            }
            None => done = text.len(),
        }
        at = done;
    }
    if done == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[done..]);
    Cow::Owned(out)
}

/// From byte `from` of `lower`: the index of the opening quote of the next password (after a
/// [`PASSWORD_WORDS`] word, spaces and an optional `(`), and the quote.
fn next_password(lower: &str, from: usize) -> Option<(usize, u8)> {
    let b = lower.as_bytes();
    let mut at = from;
    loop {
        let (pos, word) = PASSWORD_WORDS
            .iter()
            .filter_map(|w| lower[at..].find(w).map(|p| (at + p, w.len())))
            .min()?;
        let mut i = pos + word;
        while i < b.len() && (b[i] == b' ' || b[i] == b'(') {
            i += 1;
        }
        if i < b.len() && (b[i] == b'\'' || b[i] == b'"') {
            return Some((i, b[i]));
        }
        at = pos + word;
    }
}

/// The index of the quote closing a string that starts at byte `from`.
fn closing_quote(b: &[u8], from: usize, quote: u8) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        let doubled = b[i] == quote && b.get(i + 1) == Some(&quote);
        if b[i] == b'\\' || doubled {
            i += 2;
        } else if b[i] == quote {
            return Some(i);
        } else {
            i += 1;
        }
    }
    None
}

/// A writer of formatted events with passwords redacted ([`redact`]). tracing-subscriber
/// formats an event whole and writes it at once, so a password is never split across writes.
struct Redacted<M>(M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Redacted<M> {
    type Writer = RedactedWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactedWriter(self.0.make_writer())
    }
}

struct RedactedWriter<W>(W);

impl<W: Write> Write for RedactedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match redact(&String::from_utf8_lossy(buf)) {
            Cow::Borrowed(_) => self.0.write_all(buf)?,
            Cow::Owned(text) => self.0.write_all(text.as_bytes())?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tracing::callsite::{Callsite, Identifier};
    use tracing::field::FieldSet;
    use tracing::metadata::Kind;

    use super::*;

    /// An in-memory writer.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    impl Buf {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// What `log::log_enabled!` asks through tracing-log: a check with no event after it.
    struct Probe;
    static PROBE: Probe = Probe;
    static PROBE_META: Metadata<'static> = Metadata::new(
        "probe",
        "sqlx::query",
        tracing::Level::DEBUG,
        None,
        None,
        None,
        FieldSet::new(&[], Identifier(&PROBE)),
        Kind::EVENT,
    );
    impl Callsite for Probe {
        fn set_interest(&self, _: Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            &PROBE_META
        }
    }

    #[test]
    fn an_event_after_a_check_nobody_wanted_reaches_both_outputs() {
        let (terminal, file) = (Buf::default(), Buf::default());
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(terminal.clone())
                    .with_filter(Fresh(EnvFilter::new("lockbench=info"))),
            )
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(file.clone())
                    .with_filter(Fresh(EnvFilter::new("info"))),
            );
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..2 {
                tracing::dispatcher::get_default(|d| d.enabled(&PROBE_META));
                tracing::info!(target: "lockbench::run", "load started");
            }
        });
        assert_eq!(terminal.text().matches("load started").count(), 2);
        assert_eq!(file.text().matches("load started").count(), 2);
    }

    /// One test: the file is a process-wide global.
    #[test]
    fn events_go_to_the_run_under_way_and_nowhere_between_runs() {
        let dir = tempfile::tempdir().unwrap();
        let [a, b, c] = ["a", "b", "c"].map(|run| dir.path().join(run).join("logs"));
        let write = |text: &str| {
            CurrentRunLog
                .make_writer()
                .write_all(text.as_bytes())
                .unwrap()
        };
        write("before any run\n");
        let first = RunLog::start(&a).unwrap();
        write("in a\n");
        drop(first);
        write("between runs\n");
        let second = RunLog::start(&b).unwrap();
        write("in b\n");
        assert_eq!(second.path(), b.join(RUN_LOG_FILE));
        // A run that started while `second` logs takes the file over; `second` ending does
        // not take it back.
        let third = RunLog::start(&c).unwrap();
        drop(second);
        write("in c\n");
        drop(third);
        write("after\n");
        let read = |p: &Path| std::fs::read_to_string(p.join(RUN_LOG_FILE)).unwrap();
        assert_eq!(read(&a), "in a\n");
        assert_eq!(read(&b), "in b\n");
        assert_eq!(read(&c), "in c\n");
        assert!(current().is_none());
        let mode = std::fs::metadata(a.join(RUN_LOG_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn passwords_are_redacted_in_every_form() {
        let cases = [
            (
                "db.statement=\"CREATE USER IF NOT EXISTS 'lockbench'@'%' IDENTIFIED BY 'pw1'\"",
                "db.statement=\"CREATE USER IF NOT EXISTS 'lockbench'@'%' IDENTIFIED BY '***'\"",
            ),
            (
                "CREATE ROLE lockbench LOGIN PASSWORD 'p''w' ; ALTER USER x identified by \"q\\\"r\"",
                "CREATE ROLE lockbench LOGIN PASSWORD '***' ; ALTER USER x identified by \"***\"",
            ),
            (
                "SET PASSWORD = PASSWORD('s3') x",
                "SET PASSWORD = PASSWORD('***') x",
            ),
            (
                "cut short: IDENTIFIED BY 'abc",
                "cut short: IDENTIFIED BY '***",
            ),
            (
                "the password variable LOCKBENCH_X",
                "the password variable LOCKBENCH_X",
            ),
            (
                "password: none here; PASSWORD 'é1' é",
                "password: none here; PASSWORD '***' é",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(redact(raw), want, "{raw}");
        }
        assert!(matches!(redact("no secret"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_password_in_a_client_debug_event_never_reaches_the_writer() {
        let file = Buf::default();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(Redacted(file.clone()))
                .with_filter(Fresh(EnvFilter::new("debug"))),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(
                target: "sqlx::query",
                statement = "CREATE ROLE lockbench LOGIN PASSWORD 'hunter2'",
                "summary"
            );
        });
        let text = file.text();
        assert_contains!(text, "PASSWORD '***'");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
