//! lazyfs on a real mount (root and /dev/fuse); elsewhere each test says why it did not run,
//! and fails under CI, where FUSE is expected.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use super::*;

/// A mount over a fresh backing folder, or `None` (with the reason printed) where FUSE is not.
fn mounted() -> Option<(tempfile::TempDir, LazyMount)> {
    if let Some(why) = unavailable() {
        assert!(
            std::env::var_os("CI").is_none(),
            "lazyfs cannot mount under CI: {why}"
        );
        eprintln!("skipped: {why}");
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (backing, mnt) = (dir.path().join("backing"), dir.path().join("mnt"));
    fs::create_dir(&backing).expect("backing");
    fs::create_dir(&mnt).expect("mountpoint");
    let m = LazyMount::mount(&backing, &mnt).expect("mount");
    Some((dir, m))
}

fn read(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    File::open(path)
        .expect("open")
        .read_to_end(&mut out)
        .expect("read");
    out
}

#[test]
fn reads_see_unsynced_writes_and_a_crash_drops_exactly_those() {
    let Some((dir, m)) = mounted() else { return };
    let (f, g) = (m.path().join("f"), m.path().join("g"));
    let mut a = File::create(&f).expect("create f");
    a.write_all(b"synced").expect("write");
    a.sync_data().expect("fdatasync");
    a.write_all(b"+lost").expect("write");
    File::create(&g)
        .expect("create g")
        .write_all(b"never synced")
        .expect("write");
    assert_eq!(read(&f), b"synced+lost", "reads see the overlay");
    assert_eq!(fs::metadata(&f).expect("stat").len(), 11);
    assert_eq!(
        read(&dir.path().join("backing/f")),
        b"synced",
        "the backing file waits"
    );

    let dropped = m.crash();
    assert_eq!(
        dropped,
        Dropped {
            bytes: 5 + 12,
            files: 2
        }
    );
    assert_eq!(read(&f), b"synced");
    assert_eq!(read(&g), b"", "a created file stays (metadata), empty");
    let c = m.counts();
    assert_eq!(
        (c.fsyncs, c.bytes_synced, c.bytes_dropped, c.files_dropped),
        (1, 6, 17, 2)
    );
}

#[test]
fn the_page_cache_serves_no_dropped_byte_after_a_crash() {
    let Some((_dir, m)) = mounted() else { return };
    let f = m.path().join("f");
    fs::write(&f, b"old!").expect("write");
    File::open(&f).expect("open").sync_all().expect("fsync");
    let mut keep = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&f)
        .expect("open");
    keep.write_all(b"new!").expect("write");
    assert_eq!(read(&f), b"new!", "cached by the kernel now");
    m.crash();
    assert_eq!(read(&f), b"old!", "a new open reads what was synced");
    drop(keep);
}

#[test]
fn o_dsync_and_o_direct_writes_are_durable_and_metadata_is_at_once() {
    let Some((_dir, m)) = mounted() else { return };
    let (d, f) = (m.path().join("d"), m.path().join("d/log"));
    fs::create_dir(&d).expect("mkdir");
    let mut w = OpenOptions::new()
        .create(true)
        .write(true)
        .custom_flags(libc::O_DSYNC)
        .open(&f)
        .expect("open O_DSYNC");
    w.write_all(b"dsync").expect("write");
    drop(w);
    // O_DIRECT (InnoDB's default) opens and writes; an fsync makes it durable.
    let mut o = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&f)
        .expect("open O_DIRECT");
    let block = vec![b'x'; 4096];
    o.write_all(&block).expect("direct write");
    o.sync_all().expect("fsync");
    fs::rename(&f, d.join("log2")).expect("rename");
    m.crash();
    assert_eq!(read(&d.join("log2")), block, "synced, and renamed at once");
    assert!(!f.exists());
}

#[test]
fn a_slow_disk_delays_fsync_until_healed() {
    let Some((_dir, m)) = mounted() else { return };
    let mut f = File::create(m.path().join("f")).expect("create");
    let time_sync = |f: &mut File| {
        f.write_all(b"x").expect("write");
        let t = Instant::now();
        f.sync_data().expect("fdatasync");
        t.elapsed()
    };
    m.slow(Some(SlowDisk {
        delay: Duration::from_millis(200),
        jitter: Duration::from_millis(50),
        writes: false,
        seed: 7,
    }));
    for _ in 0..3 {
        let t = time_sync(&mut f);
        assert!(
            t >= Duration::from_millis(150),
            "slowed fdatasync took {t:?}"
        );
    }
    m.slow(None);
    let t = time_sync(&mut f);
    assert!(
        t < Duration::from_millis(150),
        "healed fdatasync took {t:?}"
    );
}

#[test]
fn a_dropped_mount_is_gone() {
    let Some((dir, m)) = mounted() else { return };
    fs::write(m.path().join("f"), b"x").expect("write");
    drop(m);
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let mnt = dir.path().join("mnt");
    assert!(
        !mountinfo.contains(&format!(" {} ", mnt.display())),
        "still mounted"
    );
}

#[test]
fn jitter_stays_within_its_bounds() {
    let mut s = Slow {
        disk: SlowDisk {
            delay: Duration::from_millis(200),
            jitter: Duration::from_millis(50),
            writes: false,
            seed: 1,
        },
        rng: ChaCha8Rng::seed_from_u64(1),
    };
    let draws: Vec<Duration> = (0..200).map(|_| s.draw()).collect();
    assert!(draws.iter().all(|d| (150..=250).contains(&d.as_millis())));
    assert!(draws.iter().any(|d| d.as_millis() < 190) && draws.iter().any(|d| d.as_millis() > 210));
}

#[test]
fn a_unix_socket_binds_and_answers_in_the_mount() {
    let Some((_dir, m)) = mounted() else { return };
    use std::os::unix::net::{UnixListener, UnixStream};
    let path = m.path().join("mysqld.sock");
    let l = UnixListener::bind(&path).expect("bind in lazyfs");
    let mut c = UnixStream::connect(&path).expect("connect");
    c.write_all(b"hi").expect("send");
    let (mut s, _) = l.accept().expect("accept");
    let mut got = [0u8; 2];
    s.read_exact(&mut got).expect("receive");
    assert_eq!(&got, b"hi");
}

#[test]
fn sync_all_makes_everything_durable_without_counting_a_server_fsync() {
    let Some((_dir, m)) = mounted() else { return };
    let f = m.path().join("config");
    fs::write(&f, b"set up before the load").expect("write");
    assert_eq!(m.sync_all().expect("sync_all"), 22);
    assert_eq!(m.crash(), Dropped::default());
    assert_eq!(read(&f), b"set up before the load");
    assert_eq!(m.counts().fsyncs, 0);
}
