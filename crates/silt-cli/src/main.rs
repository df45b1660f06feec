//! `silt`: the admin and inspection tool for silt databases, in the spirit of RocksDB's
//! `ldb` and `sst_dump`. This file owns the command line (clap derive) and the exit codes:
//! 0 success, 1 an error (printed on standard error, naming the file and offset where
//! there is one), 2 a usage error (clap's own).
//!
//! Invariants: commands that only read open the database read-only
//! (`DbBuilder::read_only`), so they work beside a process that holds it; commands that
//! write take the lock and refuse, with a clear message, a database another handle holds.
//! Nothing here decodes an on-disk format: `silt::inspect` does, with the engine's code.

mod codec;
mod data;
mod dumpfile;
mod inspect;
mod maint;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use codec::Codec;
use output::Format;

const EXAMPLES: &str = "\
Examples:
  silt --db /var/lib/app/db --create-if-missing put user/1 ada
  silt --db /var/lib/app/db get user/1
  silt --db /var/lib/app/db --hex get 75736572
  silt --db /var/lib/app/db scan --prefix user/ --limit 10 --format json
  silt --db /var/lib/app/db --cf users count
  silt --db /var/lib/app/db dump > backup.dump && silt --db /tmp/copy load < backup.dump
  silt --db /var/lib/app/db verify
  silt sst dump /var/lib/app/db/tables/000012.sst --command raw
  silt --db /var/lib/app/db wal dump
  silt --db /var/lib/app/db checkpoint /backups/ckpt-1
  silt --db /var/lib/app/db backup create --store /backups/silt
  silt --db /var/lib/app/db repair";

/// The admin and inspection tool for silt databases.
///
/// Read-only commands (get, scan, count, dump, cf list, stats, verify, the dumps,
/// checkpoint, backup create) open the database read-only and work beside a process that
/// holds it; the others refuse a database another process holds.
#[derive(Parser, Debug)]
#[command(name = "silt", version, after_help = EXAMPLES)]
struct Cli {
    /// The database directory.
    #[arg(long, global = true, value_name = "PATH")]
    db: Option<PathBuf>,
    /// The column family.
    #[arg(long, global = true, value_name = "NAME", default_value = "default")]
    cf: String,
    #[command(flatten)]
    codec: CodecArgs,
    /// Create the database if it does not exist (put, load and cf create).
    #[arg(long, global = true)]
    create_if_missing: bool,
    /// Output: tables for people, or JSON for machines.
    #[arg(long, global = true, value_enum, default_value = "table")]
    format: Format,
    #[command(subcommand)]
    command: Command,
}

/// How keys and values are written on the command line and printed (default: input as
/// typed, output C-escaped).
#[derive(Args, Debug)]
#[group(multiple = false)]
struct CodecArgs {
    /// Keys and values in hex (input and output).
    #[arg(long, global = true)]
    hex: bool,
    /// Keys and values C-escaped, as ldb: \n \t \r \0 \\ \" \xNN (input and output).
    #[arg(long, global = true)]
    escaped: bool,
    /// Keys and values as UTF-8 (output lossy: invalid bytes print as U+FFFD).
    #[arg(long, global = true)]
    utf8: bool,
}

/// A key range: `--from` (inclusive), `--to` (exclusive), `--prefix`.
#[derive(Args, Debug, Clone, Default)]
struct RangeArgs {
    /// First key (inclusive).
    #[arg(long)]
    from: Option<String>,
    /// End key (exclusive).
    #[arg(long)]
    to: Option<String>,
    /// Only keys with this prefix.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    prefix: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the value of KEY (exit 1 if absent).
    Get { key: String },
    /// Set KEY to VALUE (durably).
    Put {
        key: String,
        value: String,
        /// Expire the value this many seconds from now (it then reads as deleted).
        #[arg(long, value_name = "SECONDS")]
        ttl: Option<u64>,
    },
    /// Delete KEY (durably).
    Delete { key: String },
    /// List keys and values in key order.
    Scan {
        #[command(flatten)]
        range: RangeArgs,
        /// At most this many entries.
        #[arg(long)]
        limit: Option<u64>,
        /// Largest key first.
        #[arg(long)]
        reverse: bool,
    },
    /// Count the keys (in a range).
    Count {
        #[command(flatten)]
        range: RangeArgs,
    },
    /// Write every key of every column family (or of --cf if given explicitly) as lines
    /// of the dump format (docs/format/dump.md) to standard output or --output.
    Dump {
        /// Write here instead of standard output.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Load a dump (from standard input or --input), creating column families it names.
    Load {
        /// Read this file instead of standard input.
        #[arg(long, value_name = "FILE")]
        input: Option<PathBuf>,
    },
    /// Column families: list, create, drop.
    Cf {
        #[command(subcommand)]
        op: CfOp,
    },
    /// The write-ahead log: dump records, LSNs, batch contents, a torn tail or damage.
    Wal {
        #[command(subcommand)]
        op: DumpOp,
    },
    /// One table file: properties, index, bloom filter, entries, raw blocks, verify.
    Sst {
        #[command(subcommand)]
        op: SstOp,
    },
    /// The manifest: every edit, and the current version per level.
    Manifest {
        #[command(subcommand)]
        op: DumpOp,
    },
    /// Levels, sizes, amplification, cache, stalls: cold from the files (a read-only
    /// open), and live — the counters of the process that holds the database, from the
    /// STATS file it rewrites every 10 s (docs/format/stats.md) — with their age.
    Stats,
    /// Check every checksum of every live file (exit 1 naming the first bad file and
    /// offset).
    Verify,
    /// Compact a key range (all keys by default) of --cf down to the last level.
    Compact {
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// End key (exclusive).
        #[arg(long)]
        to: Option<String>,
    },
    /// Make a checkpoint: a directory that opens as a database at one moment.
    Checkpoint {
        /// The new directory (must not exist).
        dir: PathBuf,
    },
    /// Incremental, checksummed backups (docs/format/backup.md).
    Backup {
        #[command(subcommand)]
        op: BackupOp,
    },
    /// Rebuild a lost or damaged manifest from the tables and the log (as RocksDB's
    /// RepairDB); prints what could not be recovered.
    Repair,
}

#[derive(Subcommand, Debug)]
enum CfOp {
    /// List the column families.
    List,
    /// Create a column family.
    Create { name: String },
    /// Drop a column family and its data.
    Drop { name: String },
}

#[derive(Subcommand, Debug)]
enum DumpOp {
    /// Print everything.
    Dump,
}

#[derive(Subcommand, Debug)]
enum SstOp {
    /// Print a table file (as sst_dump).
    Dump {
        /// The table file (`tables/{id}.sst`).
        file: PathBuf,
        /// What to print: properties (with bloom stats), scan (entries), index, raw
        /// (every block with its checksum result), verify (read every block; exit 1 at
        /// the first bad one).
        #[arg(long, value_enum, default_value = "properties")]
        command: SstCommand,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SstCommand {
    Properties,
    Scan,
    Index,
    Raw,
    Verify,
}

#[derive(Subcommand, Debug)]
enum BackupOp {
    /// Back up --db into the store.
    Create {
        #[arg(long, value_name = "DIR")]
        store: PathBuf,
    },
    /// List the backups in the store.
    List {
        #[arg(long, value_name = "DIR")]
        store: PathBuf,
    },
    /// Restore a backup into a new directory, checking every file's checksum.
    Restore {
        #[arg(long, value_name = "DIR")]
        store: PathBuf,
        /// The backup's id (see `backup list`).
        #[arg(long)]
        id: u64,
        /// The new database directory (must not exist).
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
    },
    /// Check every file of a backup without restoring it.
    Verify {
        #[arg(long, value_name = "DIR")]
        store: PathBuf,
        #[arg(long)]
        id: u64,
    },
    /// Remove all but the newest backups, and the files only they needed.
    Purge {
        #[arg(long, value_name = "DIR")]
        store: PathBuf,
        /// How many backups to keep.
        #[arg(long)]
        keep: usize,
    },
}

/// What every command gets: the global options.
pub struct Ctx {
    db: Option<PathBuf>,
    create_if_missing: bool,
    /// The column family (`--cf`).
    pub cf: String,
    /// Whether `--cf` was given (dump then takes only that family).
    pub cf_given: bool,
    /// The key/value notation.
    pub codec: Codec,
    /// The output format.
    pub format: Format,
}

impl Ctx {
    /// `--db`, required by most commands.
    pub fn db_path(&self) -> Result<&std::path::Path, String> {
        self.db
            .as_deref()
            .ok_or_else(|| "this command needs --db PATH".to_string())
    }

    /// Opens the database read-only (beside a writer, if one holds it).
    pub fn open_read_only(&self) -> Result<silt::Db, String> {
        let p = self.db_path()?;
        silt::Db::builder(p)
            .read_only(true)
            .open()
            .map_err(|e| describe(&e))
    }

    /// Opens the database for writing: refused if another handle holds it.
    pub fn open_writable(&self) -> Result<silt::Db, String> {
        let p = self.db_path()?;
        silt::Db::builder(p)
            .create_if_missing(self.create_if_missing)
            .open()
            .map_err(|e| describe(&e))
    }

    /// The column family `--cf` in `db`.
    pub fn cf(&self, db: &silt::Db) -> Result<silt::ColumnFamily, String> {
        db.cf(&self.cf).map_err(|e| describe(&e))
    }

    /// A key or value from the command line.
    pub fn parse(&self, s: &str) -> Result<Vec<u8>, String> {
        self.codec.parse(s)
    }

    /// A key or value for output.
    pub fn show(&self, b: &[u8]) -> String {
        self.codec.show(b)
    }
}

/// An engine error as the message the tool prints.
pub fn describe(e: &silt::Error) -> String {
    match e {
        silt::Error::Locked { .. } => format!(
            "{e}. Another process holds this database: stop it (or run this from it). \
             Read-only commands (get, scan, count, dump, stats, verify, checkpoint, backup \
             create) work beside it"
        ),
        silt::Error::InvalidArgument(m) if m.contains("create_if_missing") => {
            format!("{e} (pass --create-if-missing)")
        }
        _ => e.to_string(),
    }
}

fn main() -> ExitCode {
    // clap exits with 2 on a usage error and 0 for --help / --version.
    let cli = Cli::parse();
    let codec = match (cli.codec.hex, cli.codec.escaped, cli.codec.utf8) {
        (true, _, _) => Codec::Hex,
        (_, true, _) => Codec::Escaped,
        (_, _, true) => Codec::Utf8,
        _ => Codec::Default,
    };
    let cf_given = std::env::args().any(|a| a == "--cf" || a.starts_with("--cf="));
    let ctx = Ctx {
        db: cli.db,
        create_if_missing: cli.create_if_missing,
        cf: cli.cf,
        cf_given,
        codec,
        format: cli.format,
    };
    match run(&ctx, cli.command) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run(ctx: &Ctx, cmd: Command) -> Result<ExitCode, String> {
    match cmd {
        Command::Get { key } => data::get(ctx, &key),
        Command::Put { key, value, ttl } => data::put(ctx, &key, &value, ttl),
        Command::Delete { key } => data::delete(ctx, &key),
        Command::Scan {
            range,
            limit,
            reverse,
        } => data::scan(ctx, &range, limit, reverse),
        Command::Count { range } => data::count(ctx, &range),
        Command::Dump { output } => data::dump(ctx, output.as_deref()),
        Command::Load { input } => data::load(ctx, input.as_deref()),
        Command::Cf { op } => match op {
            CfOp::List => data::cf_list(ctx),
            CfOp::Create { name } => data::cf_create(ctx, &name),
            CfOp::Drop { name } => data::cf_drop(ctx, &name),
        },
        Command::Wal { op: DumpOp::Dump } => inspect::wal_dump(ctx),
        Command::Sst {
            op: SstOp::Dump { file, command },
        } => inspect::sst_dump(ctx, &file, command),
        Command::Manifest { op: DumpOp::Dump } => inspect::manifest_dump(ctx),
        Command::Stats => inspect::stats(ctx),
        Command::Verify => maint::verify(ctx),
        Command::Compact { from, to } => maint::compact(ctx, from.as_deref(), to.as_deref()),
        Command::Checkpoint { dir } => maint::checkpoint(ctx, &dir),
        Command::Backup { op } => match op {
            BackupOp::Create { store } => maint::backup_create(ctx, &store),
            BackupOp::List { store } => maint::backup_list(ctx, &store),
            BackupOp::Restore { store, id, to } => maint::backup_restore(ctx, &store, id, &to),
            BackupOp::Verify { store, id } => maint::backup_verify(ctx, &store, id),
            BackupOp::Purge { store, keep } => maint::backup_purge(ctx, &store, keep),
        },
        Command::Repair => maint::repair(ctx),
    }
}
