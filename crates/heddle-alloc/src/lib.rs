//! Heddle's global allocator: mimalloc, called the way its fast path wants.
//!
//! The `mimalloc` crate hands every allocation to `mi_malloc_aligned`, even
//! when the alignment is one that plain `mi_malloc` already guarantees. In
//! mimalloc v3 that call takes a slow, over-allocating path for any block
//! over 1 KiB whose size is not a power of two (and for smaller blocks when
//! their page has no free block): a callgrind profile of `heddle serve`
//! answering SendMessage showed 36 such calls a request and the allocator at
//! a tenth of all instructions.
//!
//! [`MiMalloc`] asks for plain `mi_malloc` / `mi_zalloc` / `mi_realloc`
//! whenever mimalloc's own size classes already give the alignment the
//! layout needs, and for the aligned variants only otherwise.
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: heddle_alloc::MiMalloc = heddle_alloc::MiMalloc;
//! ```

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as ffi;

/// The alignment every mimalloc block of at least this many bytes has
/// (`MI_MAX_ALIGN_SIZE`, `sizeof(max_align_t)` on the platforms Heddle runs
/// on). mimalloc's size classes above 8 bytes are multiples of 16 and each
/// page's first block is 16-aligned, so every block of 16 bytes or more is
/// 16-aligned and an 8-byte block is 8-aligned.
const PLAIN_ALIGN: usize = 16;

/// mimalloc as a [`GlobalAlloc`], with the plain entry points for ordinary
/// layouts.
#[derive(Clone, Copy, Debug, Default)]
pub struct MiMalloc;

/// Whether plain `mi_malloc(size)` returns memory aligned for `align`: the
/// alignment is at most 16 and the size a non-zero multiple of it. A block is
/// never smaller than the size asked for, so an 8-byte request gets an 8-byte
/// block, aligned to 8. The multiple also keeps a guarded mimalloc build
/// sound, which may place a block right before a guard page, at an address
/// only as aligned as its size. (Rust types' sizes are multiples of their
/// alignment, so nearly every layout passes.)
#[inline]
fn plain_fits(size: usize, align: usize) -> bool {
    // `align` is a power of two (a `Layout` guarantees it).
    align <= PLAIN_ALIGN && align <= size && size & (align - 1) == 0
}

// SAFETY: every method forwards to mimalloc, which returns either null or a
// block of at least the requested size; the plain functions are used only
// when `plain_fits` says the block's alignment satisfies the layout, and
// `mi_free` / `mi_realloc*` accept blocks from either family.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: plain mimalloc calls with a size; no preconditions.
        unsafe {
            if plain_fits(size, align) {
                ffi::mi_malloc(size).cast()
            } else {
                ffi::mi_malloc_aligned(size, align).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        // SAFETY: as in `alloc`.
        unsafe {
            if plain_fits(size, align) {
                ffi::mi_zalloc(size).cast()
            } else {
                ffi::mi_zalloc_aligned(size, align).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: the caller passes a pointer this allocator returned, and
        // `mi_free` frees blocks from the plain and the aligned functions.
        unsafe { ffi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        // SAFETY: the caller passes a live pointer from this allocator and a
        // non-zero new size; mimalloc copies the contents and frees the old
        // block, or returns null and leaves it alone.
        unsafe {
            if plain_fits(new_size, align) {
                ffi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                ffi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, align).cast()
            }
        }
    }
}
