//! The allocator honours every layout's alignment, whichever mimalloc entry
//! point serves it, and keeps contents across reallocation; this test binary
//! also runs with it as the global allocator.

use std::alloc::{GlobalAlloc, Layout};

use heddle_alloc::MiMalloc;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

const ALIGNS: [usize; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 4096, 65536];

/// Sizes around mimalloc's class edges (8, 16, 1 KiB small objects, 8 KiB
/// buffers, medium and large objects).
fn sizes() -> impl Iterator<Item = usize> {
    (1..=80).chain([
        96,
        100,
        127,
        128,
        129,
        200,
        888,
        1000,
        1023,
        1024,
        1025,
        2200,
        4095,
        4096,
        4097,
        8191,
        8192,
        8193,
        10_000,
        65_536,
        100_000,
        1 << 20,
        5 << 20,
    ])
}

fn layouts() -> impl Iterator<Item = Layout> {
    sizes().flat_map(|size| {
        ALIGNS
            .into_iter()
            .filter_map(move |align| Layout::from_size_align(size, align).ok())
    })
}

fn fill(ptr: *mut u8, len: usize, seed: u8) {
    for i in 0..len {
        // SAFETY: `ptr` points at a live block of at least `len` bytes.
        unsafe { ptr.add(i).write(seed.wrapping_add(i as u8)) };
    }
}

fn holds(ptr: *const u8, len: usize, seed: u8) -> bool {
    // SAFETY: `ptr` points at a live block of at least `len` initialised bytes.
    (0..len).all(|i| unsafe { ptr.add(i).read() } == seed.wrapping_add(i as u8))
}

#[test]
fn every_layout_comes_back_aligned_and_writable() {
    for layout in layouts() {
        // Keep a few alive at once so blocks come from partly used pages too.
        let blocks: Vec<*mut u8> = (0..3)
            .map(|n| {
                // SAFETY: non-zero size.
                let ptr = unsafe { MiMalloc.alloc(layout) };
                assert!(!ptr.is_null(), "{layout:?}");
                assert_eq!(ptr as usize % layout.align(), 0, "{layout:?}");
                fill(ptr, layout.size(), n);
                ptr
            })
            .collect();
        for (n, ptr) in blocks.into_iter().enumerate() {
            assert!(holds(ptr, layout.size(), n as u8), "{layout:?}");
            // SAFETY: allocated above with this layout.
            unsafe { MiMalloc.dealloc(ptr, layout) };
        }
    }
}

#[test]
fn zeroed_blocks_are_zero_even_after_reuse() {
    for layout in layouts().filter(|l| l.size() <= 1 << 20) {
        // Dirty a block of this class first, so the zeroed one may reuse it.
        // SAFETY: non-zero size; freed right after.
        unsafe {
            let dirty = MiMalloc.alloc(layout);
            fill(dirty, layout.size(), 0xA5);
            MiMalloc.dealloc(dirty, layout);
        }
        // SAFETY: non-zero size.
        let ptr = unsafe { MiMalloc.alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        assert_eq!(ptr as usize % layout.align(), 0, "{layout:?}");
        // SAFETY: a live block of `size` bytes, zero-initialised.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, layout.size()) };
        assert!(bytes.iter().all(|&b| b == 0), "{layout:?}");
        // SAFETY: allocated above with this layout.
        unsafe { MiMalloc.dealloc(ptr, layout) };
    }
}

#[test]
fn realloc_keeps_contents_and_alignment_across_entry_points() {
    // Growing and shrinking crosses between the plain and the aligned
    // functions (e.g. 8 bytes aligned to 16 is aligned-only, 32 is plain).
    let news = [1usize, 8, 16, 24, 100, 1500, 9000, 200_000];
    for layout in layouts().filter(|l| l.size() <= 100_000) {
        for new_size in news {
            // SAFETY: non-zero size.
            let ptr = unsafe { MiMalloc.alloc(layout) };
            assert!(!ptr.is_null());
            fill(ptr, layout.size(), 7);
            // SAFETY: `ptr` is live with `layout`; `new_size` is non-zero and
            // rounded up to the alignment stays far below isize::MAX.
            let moved = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
            assert!(!moved.is_null(), "{layout:?} -> {new_size}");
            assert_eq!(
                moved as usize % layout.align(),
                0,
                "{layout:?} -> {new_size}"
            );
            assert!(
                holds(moved, layout.size().min(new_size), 7),
                "{layout:?} -> {new_size}"
            );
            fill(moved, new_size, 9);
            let grown = Layout::from_size_align(new_size, layout.align()).expect("valid");
            // SAFETY: `moved` is live with the layout it was reallocated to.
            unsafe { MiMalloc.dealloc(moved, grown) };
        }
    }
}

#[test]
fn ordinary_collections_work_on_top() {
    let mut strings: Vec<String> = (0..10_000).map(|i| format!("task-{i:08}")).collect();
    strings.retain(|s| !s.ends_with('7'));
    let joined = strings.join(",");
    assert_eq!(strings.len(), 9_000);
    assert!(joined.starts_with("task-00000000,task-00000001"));
    let boxed: Vec<Box<[u64; 300]>> = (0..100).map(|i| Box::new([i; 300])).collect();
    assert!(
        boxed
            .iter()
            .enumerate()
            .all(|(i, b)| b.iter().all(|&v| v == i as u64))
    );
}
