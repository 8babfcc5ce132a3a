//! Huge pages for the few large buffers that searches read at random: a bank's vector rows, its graph's
//! layer 0, and a large compression's centroids.
//!
//! A graph search at 1,000,000 experiences reads a few thousand rows at random places in 768 MB. With the
//! kernel's 4 KiB pages every such read also misses the TLB and walks the page tables (1.5 MB of them for
//! those rows, more than the processor's caches keep near), and the walk waits on memory as the row does.
//! With 2 MiB pages the same rows are 384 TLB entries, which the processor keeps. Linux gives a process huge
//! pages only where it asks for them (`/sys/kernel/mm/transparent_hugepage/enabled` is `madvise` on
//! Debian and on this project's machines), so [`back_with_huge_pages`] asks for a buffer's whole 2 MiB
//! pages with `madvise(MADV_HUGEPAGE)`, and has the kernel move what is already written onto them now with
//! `MADV_COLLAPSE` (Linux 6.1 on) instead of some minutes later.
//!
//! Advice never changes a byte of the buffer, only how the kernel maps it. Where the kernel refuses (an
//! older kernel, THP off, no free huge page), nothing changes but the speed, and the caller is told.
//! Measured in the Banks chapter (run 12).

/// A buffer smaller than this is left as it is (its pages fit the TLB already).
pub const WORTH: usize = 16 << 20;

/// The size of an x86_64 and aarch64 huge page.
const HUGE: usize = 2 << 20;

/// What the kernel did with a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// The buffer is under [`WORTH`], or has no whole huge page: left alone.
    Small,
    /// Its whole huge pages are backed by huge pages now.
    Huge,
    /// Marked for huge pages, but the kernel did not move the pages already written (they will be as
    /// the kernel's background collapse reaches them).
    Advised,
    /// The kernel refused the advice (or this is not Linux): 4 KiB pages.
    Refused,
}

/// Asks the kernel to back the whole 2 MiB pages inside `buf` with huge pages, now (see the module doc).
/// Call it once a large, long-lived buffer is written (or just after it is allocated): never on a hot path.
pub fn back_with_huge_pages<T>(buf: &[T]) -> Backing {
    let bytes = std::mem::size_of_val(buf);
    if bytes < WORTH {
        return Backing::Small;
    }
    let start = buf.as_ptr() as usize;
    let (first, last) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
    if last <= first {
        return Backing::Small;
    }
    advise(first, last - first)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn advise(at: usize, len: usize) -> Backing {
    let ptr = at as *mut libc::c_void;
    // SAFETY: `at..at + len` lies inside a live buffer the caller borrows (page-aligned by construction).
    // Both calls are advice about how the kernel maps those pages: neither reads, writes nor unmaps them, so
    // every value in the buffer stays as it is, and a refusal only returns an error.
    let advised = unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) } == 0;
    if !advised {
        return Backing::Refused;
    }
    // SAFETY: as above; MADV_COLLAPSE copies the pages' contents onto huge pages before it remaps them.
    match unsafe { libc::madvise(ptr, len, libc::MADV_COLLAPSE) } {
        0 => Backing::Huge,
        _ => Backing::Advised,
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn advise(_at: usize, _len: usize) -> Backing {
    Backing::Refused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_are_left_alone() {
        assert_eq!(back_with_huge_pages(&[0u8; 4096]), Backing::Small);
        assert_eq!(back_with_huge_pages::<u32>(&[]), Backing::Small);
    }

    /// Whatever the kernel does with the advice, the buffer's values are the same afterwards.
    #[test]
    fn advice_keeps_every_value() {
        let v: Vec<u32> = (0..(WORTH as u32 / 4) * 2).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let before = v.clone();
        let backing = back_with_huge_pages(&v);
        assert_ne!(backing, Backing::Small, "a {} MiB buffer is worth advising", (v.len() * 4) >> 20);
        assert_eq!(v, before);
    }
}
