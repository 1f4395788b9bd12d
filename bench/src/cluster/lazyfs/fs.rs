//! The FUSE side: a passthrough over a backing folder whose file writes wait in an
//! [`Overlay`] per file until that file's fsync (or fdatasync) writes them to the backing file.
//! Metadata (create, unlink, rename, mkdir, truncate, chmod) reaches the backing folder at once.
//!
//! Every reply carries a zero TTL and every open leaves out `FOPEN_KEEP_CACHE`, so after a
//! crash the kernel asks again and serves no dropped byte from its caches.

use std::ffi::OsStr;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use super::shared::{FileState, Shared, Slow};

const TTL: Duration = Duration::ZERO;

/// The filesystem the session runs; everything it shares with the mount's owner is in `Shared`.
pub(super) struct LazyFs(pub Arc<Shared>);

fn errno(e: io::Error) -> Errno {
    Errno::from(e)
}

fn kind(meta: &Metadata) -> FileType {
    FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile)
}

fn attr(ino: u64, meta: &Metadata, unsynced_end: u64) -> FileAttr {
    let time = |s: i64, ns: i64| {
        UNIX_EPOCH + Duration::from_secs(s.max(0) as u64) + Duration::from_nanos(ns.max(0) as u64)
    };
    FileAttr {
        ino: INodeNo(ino),
        size: meta.len().max(unsynced_end),
        blocks: meta.blocks(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: kind(meta),
        perm: (meta.mode() & 0o7777) as u16,
        nlink: meta.nlink() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: meta.rdev() as u32,
        blksize: 4096,
        flags: 0,
    }
}

/// The backing file's open flags: no O_DIRECT (our buffers are not aligned), no O_APPEND
/// (pwrite must land where the kernel says); always readable, so reads can fill a page.
fn backing_options(flags: i32) -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true);
    if flags & libc::O_ACCMODE != libc::O_RDONLY {
        o.write(true);
    }
    let strip = libc::O_ACCMODE
        | libc::O_CREAT
        | libc::O_EXCL
        | libc::O_TRUNC
        | libc::O_APPEND
        | libc::O_DIRECT
        | libc::O_NOCTTY;
    o.custom_flags(flags & !strip);
    o
}

impl LazyFs {
    fn path(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        let inodes = self.0.inodes.lock().expect("inodes");
        let rel = inodes.paths.get(&ino.0).ok_or(Errno::ENOENT)?;
        Ok(self.0.backing.join(rel))
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<(PathBuf, PathBuf), Errno> {
        let inodes = self.0.inodes.lock().expect("inodes");
        let rel = inodes.paths.get(&parent.0).ok_or(Errno::ENOENT)?.join(name);
        Ok((self.0.backing.join(&rel), rel))
    }

    fn state(&self, ino: u64) -> Arc<Mutex<FileState>> {
        let mut files = self.0.files.lock().expect("files");
        files.entry(ino).or_default().clone()
    }

    fn unsynced_end(&self, ino: u64) -> u64 {
        let files = self.0.files.lock().expect("files");
        files
            .get(&ino)
            .map_or(0, |s| s.lock().expect("file").overlay.end())
    }

    fn handle(&self, fh: FileHandle) -> Result<Arc<File>, Errno> {
        let handles = self.0.handles.lock().expect("handles");
        handles.get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    fn keep(&self, file: File) -> FileHandle {
        let fh = self.0.next_fh.fetch_add(1, Ordering::Relaxed);
        self.0
            .handles
            .lock()
            .expect("handles")
            .insert(fh, Arc::new(file));
        FileHandle(fh)
    }

    fn entry(&self, rel: &Path, full: &Path) -> Result<FileAttr, Errno> {
        let meta = fs::symlink_metadata(full).map_err(errno)?;
        let ino = self.0.inodes.lock().expect("inodes").ino(rel);
        Ok(attr(ino, &meta, self.unsynced_end(ino)))
    }

    /// A new entry belongs to the caller, as if it had made it itself.
    fn own(&self, req: &Request, full: &Path) -> Result<(), Errno> {
        std::os::unix::fs::lchown(full, Some(req.uid()), Some(req.gid())).map_err(errno)
    }

    fn read_at(&self, ino: u64, file: &File, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let state = self.state(ino);
        let st = state.lock().expect("file");
        let end = file.metadata()?.len().max(st.overlay.end());
        if offset >= end {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; (end - offset).min(size as u64) as usize];
        let mut done = 0;
        while done < buf.len() {
            let n = file.read_at(&mut buf[done..], offset + done as u64)?;
            if n == 0 {
                break; // past the backing file's end: zeros, unless the overlay has bytes there
            }
            done += n;
        }
        st.overlay.apply(offset, &mut buf);
        Ok(buf)
    }

    /// Writes the file's unsynced extents to the backing file and syncs it there.
    fn sync(&self, ino: u64, fh: FileHandle, datasync: bool) -> io::Result<()> {
        let state = self.state(ino);
        let (writer, bytes) = state.lock().expect("file").write_back()?;
        let file = match writer {
            Some(w) => w,
            None => (self.handle(fh)).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?,
        };
        if datasync {
            file.sync_data()?;
        } else {
            file.sync_all()?;
        }
        let c = &self.0.counts;
        c.fsyncs.fetch_add(1, Ordering::Relaxed);
        c.bytes_synced.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn setattr_size(
        &self,
        ino: u64,
        path: &Path,
        fh: Option<FileHandle>,
        size: u64,
    ) -> io::Result<()> {
        let state = self.state(ino);
        let mut st = state.lock().expect("file");
        match fh.and_then(|fh| self.handle(fh).ok()) {
            Some(f) => f.set_len(size)?,
            None => OpenOptions::new().write(true).open(path)?.set_len(size)?,
        }
        st.overlay.truncate(size);
        Ok(())
    }

    /// Sleeps the slow disk's delay, if one is set and covers this call.
    fn stall(&self, write: bool) {
        let pause = {
            let mut slow = self.0.slow.lock().expect("slow");
            slow.as_mut()
                .filter(|s| !write || s.disk.writes)
                .map(Slow::draw)
        };
        if let Some(d) = pause {
            std::thread::sleep(d);
        }
    }

    /// Makes `parent`'s child `name` with `make`, gives it to the caller and answers its entry
    /// (a node, a directory, a symlink).
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        make: impl FnOnce(&Path) -> Result<(), Errno>,
        reply: ReplyEntry,
    ) {
        let r = self.child(parent, name).and_then(|(full, rel)| {
            make(&full)?;
            self.own(req, &full)?;
            self.entry(&rel, &full)
        });
        reply_entry(reply, r);
    }

    /// Removes `parent`'s child `name` with `remove` (a file's or an empty directory's) and
    /// forgets its inode.
    fn remove(
        &self,
        parent: INodeNo,
        name: &OsStr,
        remove: impl FnOnce(&Path) -> io::Result<()>,
        reply: ReplyEmpty,
    ) {
        let r = self.child(parent, name).and_then(|(full, rel)| {
            remove(&full).map_err(errno)?;
            self.0.inodes.lock().expect("inodes").forget(&rel);
            Ok(())
        });
        reply_empty(reply, r);
    }
}

fn reply_entry(reply: ReplyEntry, r: Result<FileAttr, Errno>) {
    match r {
        Ok(a) => reply.entry(&TTL, &a, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        reply_entry(
            reply,
            self.child(parent, name)
                .and_then(|(full, rel)| self.entry(&rel, &full)),
        );
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let meta = match fh.and_then(|fh| self.handle(fh).ok()) {
            Some(f) => f.metadata().map_err(errno),
            None => self
                .path(ino)
                .and_then(|p| fs::symlink_metadata(p).map_err(errno)),
        };
        match meta {
            Ok(m) => reply.attr(&TTL, &attr(ino.0, &m, self.unsynced_end(ino.0))),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Times are not kept apart nor set: no server here reads them back.
        let r = (|| -> Result<FileAttr, Errno> {
            let path = self.path(ino)?;
            if let Some(size) = size {
                self.setattr_size(ino.0, &path, fh, size).map_err(errno)?;
            }
            if let Some(mode) = mode {
                fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777))
                    .map_err(errno)?;
            }
            if uid.is_some() || gid.is_some() {
                std::os::unix::fs::lchown(&path, uid, gid).map_err(errno)?;
            }
            let meta = fs::symlink_metadata(&path).map_err(errno)?;
            Ok(attr(ino.0, &meta, self.unsynced_end(ino.0)))
        })();
        match r {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.path(ino).and_then(|p| fs::read_link(p).map_err(errno)) {
            Ok(t) => reply.data(t.as_os_str().as_encoded_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        // A server's unix socket in its data directory (MariaDB's) binds through here.
        let kind = nix::sys::stat::SFlag::from_bits_truncate(mode & libc::S_IFMT);
        let perm = nix::sys::stat::Mode::from_bits_truncate(mode & !umask & 0o7777);
        let make = |full: &Path| {
            nix::sys::stat::mknod(full, kind, perm, rdev.into())
                .map_err(|e| Errno::from_i32(e as i32))
        };
        self.make(req, parent, name, make, reply);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let make = |full: &Path| {
            fs::DirBuilder::new()
                .mode(mode & !umask & 0o7777)
                .create(full)
                .map_err(errno)
        };
        self.make(req, parent, name, make, reply);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, |full| fs::remove_file(full), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, |full| fs::remove_dir(full), reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let make = |full: &Path| std::os::unix::fs::symlink(target, full).map_err(errno);
        self.make(req, parent, link_name, make, reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            return reply.error(Errno::EINVAL);
        }
        let r = self.child(parent, name).and_then(|(from, from_rel)| {
            let (to, to_rel) = self.child(newparent, newname)?;
            fs::rename(&from, &to).map_err(errno)?;
            self.0
                .inodes
                .lock()
                .expect("inodes")
                .rename(&from_rel, &to_rel);
            Ok(())
        });
        reply_empty(reply, r);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let r = self
            .path(ino)
            .and_then(|p| backing_options(flags.0).open(p).map_err(errno));
        match r {
            Ok(file) => {
                if flags.0 & libc::O_TRUNC != 0 {
                    let _ = file.set_len(0);
                    self.state(ino.0).lock().expect("file").overlay.truncate(0);
                }
                reply.opened(self.keep(file), FopenFlags::empty())
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let r = self
            .handle(fh)
            .and_then(|f| self.read_at(ino.0, &f, offset, size).map_err(errno));
        match r {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let file = match self.handle(fh) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        {
            let state = self.state(ino.0);
            let mut st = state.lock().expect("file");
            st.overlay.write(offset, data);
            st.writer = Some(file);
        }
        self.stall(true);
        reply.written(data.len() as u32);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2) makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.0.handles.lock().expect("handles").remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.sync(ino.0, fh, datasync).map_err(errno);
        self.stall(false);
        reply_empty(reply, r);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = (|| -> Result<Vec<(u64, FileType, std::ffi::OsString)>, Errno> {
            let inodes = self.0.inodes.lock().expect("inodes");
            let rel = inodes.paths.get(&ino.0).ok_or(Errno::ENOENT)?.clone();
            drop(inodes);
            let mut out = vec![
                (ino.0, FileType::Directory, ".".into()),
                (INodeNo::ROOT.0, FileType::Directory, "..".into()),
            ];
            for e in fs::read_dir(self.0.backing.join(&rel)).map_err(errno)? {
                let e = e.map_err(errno)?;
                let kind = e
                    .file_type()
                    .ok()
                    .and_then(FileType::from_std)
                    .unwrap_or(FileType::RegularFile);
                let child = self
                    .0
                    .inodes
                    .lock()
                    .expect("inodes")
                    .ino(&rel.join(e.file_name()));
                out.push((child, kind, e.file_name()));
            }
            Ok(out)
        })();
        match r {
            Ok(entries) => {
                for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize)
                {
                    if reply.add(INodeNo(ino), i as u64 + 1, kind, name) {
                        break;
                    }
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Metadata is durable at once here; the backing folder's own sync keeps it honest.
        let r = self
            .path(ino)
            .and_then(|p| File::open(p).and_then(|d| d.sync_all()).map_err(errno));
        reply_empty(reply, r);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match nix::sys::statvfs::statvfs(&self.0.backing) {
            Ok(s) => reply.statfs(
                s.blocks(),
                s.blocks_free(),
                s.blocks_available(),
                s.files(),
                s.files_free(),
                s.block_size() as u32,
                s.name_max() as u32,
                s.fragment_size() as u32,
            ),
            Err(e) => reply.error(Errno::from_i32(e as i32)),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = self.child(parent, name).and_then(|(full, rel)| {
            let mut o = backing_options(flags);
            o.mode(mode & !umask & 0o7777);
            if flags & libc::O_EXCL != 0 {
                o.create_new(true);
            } else {
                o.create(true);
            }
            let file = o.write(true).open(&full).map_err(errno)?;
            self.own(req, &full)?;
            let attr = self.entry(&rel, &full)?;
            Ok((attr, file))
        });
        match r {
            Ok((attr, file)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                self.keep(file),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        // Only the size matters to the model: grow the file at once (metadata), or keep it.
        let r = (|| -> Result<(), Errno> {
            if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            if mode & libc::FALLOC_FL_KEEP_SIZE != 0 {
                return Ok(());
            }
            let file = self.handle(fh)?;
            let len = file.metadata().map_err(errno)?.len();
            if offset + length > len {
                let state = self.state(ino.0);
                let _st = state.lock().expect("file");
                file.set_len(offset + length).map_err(errno)?;
            }
            Ok(())
        })();
        reply_empty(reply, r);
    }
}
