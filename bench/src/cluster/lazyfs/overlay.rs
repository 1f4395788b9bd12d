//! One file's writes that no fsync has made durable yet: extents by offset, the newest write
//! winning where they overlap. Pure (no I/O), so every case is tested without a mount.

use std::collections::BTreeMap;

/// Unsynced extents of one file, never overlapping (a write trims what it covers).
#[derive(Debug, Default)]
pub struct Overlay {
    extents: BTreeMap<u64, Vec<u8>>,
}

impl Overlay {
    /// Bytes held (what a crash would drop).
    pub fn bytes(&self) -> u64 {
        self.extents.values().map(|e| e.len() as u64).sum()
    }

    /// One past the last byte held, 0 when empty: the file's size is at least this.
    pub fn end(&self) -> u64 {
        self.extents
            .iter()
            .next_back()
            .map_or(0, |(off, e)| off + e.len() as u64)
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.cut(offset, offset + data.len() as u64);
        self.extents.insert(offset, data.to_vec());
    }

    /// Drops everything at or past `size` (a truncate, applied to the backing file at once).
    pub fn truncate(&mut self, size: u64) {
        self.cut(size, u64::MAX);
    }

    /// Lays the held bytes over `buf`, which holds the file from `offset` on.
    pub fn apply(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + buf.len() as u64;
        // The extent that starts before `offset` may reach into the buffer.
        let first = self.extents.range(..=offset).next_back().map(|(k, _)| *k);
        let from = first.unwrap_or(offset);
        for (&off, ext) in self.extents.range(from..end) {
            let ext_end = off + ext.len() as u64;
            if ext_end <= offset {
                continue;
            }
            let lo = off.max(offset);
            let hi = ext_end.min(end);
            buf[(lo - offset) as usize..(hi - offset) as usize]
                .copy_from_slice(&ext[(lo - off) as usize..(hi - off) as usize]);
        }
    }

    /// Takes every extent out, in offset order (an fsync writes them to the backing file).
    pub fn take(&mut self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut self.extents).into_iter().collect()
    }

    /// Removes the range [lo, hi) from the extents, splitting those that straddle it.
    fn cut(&mut self, lo: u64, hi: u64) {
        let first = self.extents.range(..lo).next_back().map(|(k, _)| *k);
        let keys: Vec<u64> = first
            .into_iter()
            .chain(self.extents.range(lo..hi).map(|(k, _)| *k))
            .collect();
        for off in keys {
            let ext = self.extents.remove(&off).expect("key just listed");
            let ext_end = off + ext.len() as u64;
            if ext_end <= lo || off >= hi {
                self.extents.insert(off, ext);
                continue;
            }
            if off < lo {
                self.extents
                    .insert(off, ext[..(lo - off) as usize].to_vec());
            }
            if ext_end > hi {
                self.extents.insert(hi, ext[(hi - off) as usize..].to_vec());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(o: &Overlay, base: &[u8]) -> Vec<u8> {
        let mut buf = base.to_vec();
        buf.resize(o.end().max(base.len() as u64) as usize, 0);
        o.apply(0, &mut buf);
        buf
    }

    #[test]
    fn a_later_write_wins_where_it_overlaps_and_the_rest_stays() {
        let mut o = Overlay::default();
        o.write(2, b"aaaaaa");
        o.write(4, b"bb");
        o.write(0, b"c");
        o.write(7, b"ddd");
        assert_eq!(view(&o, b"xxxxxxxxxx"), b"cxaabbaddd");
        assert_eq!(o.end(), 10);
        assert_eq!(o.bytes(), 1 + 2 + 2 + 1 + 3);
    }

    #[test]
    fn a_write_covering_several_extents_replaces_them() {
        let mut o = Overlay::default();
        o.write(0, b"ab");
        o.write(4, b"cd");
        o.write(1, b"zzzz");
        assert_eq!(
            o.take(),
            vec![
                (0, b"a".to_vec()),
                (1, b"zzzz".to_vec()),
                (5, b"d".to_vec())
            ]
        );
        assert_eq!(o.bytes(), 0);
    }

    #[test]
    fn apply_reads_a_window_in_the_middle_of_an_extent() {
        let mut o = Overlay::default();
        o.write(10, b"0123456789");
        let mut buf = [b'.'; 4];
        o.apply(12, &mut buf);
        assert_eq!(&buf, b"2345");
        let mut buf = [b'.'; 4];
        o.apply(8, &mut buf);
        assert_eq!(&buf, b"..01");
        let mut buf = [b'.'; 4];
        o.apply(20, &mut buf);
        assert_eq!(&buf, b"....");
    }

    #[test]
    fn truncate_drops_what_lies_past_the_new_size() {
        let mut o = Overlay::default();
        o.write(0, b"abcdef");
        o.write(10, b"gh");
        o.truncate(3);
        assert_eq!(o.take(), vec![(0, b"abc".to_vec())]);
        o.truncate(0);
        assert_eq!(o.bytes(), 0);
        assert_eq!(o.end(), 0);
    }
}
