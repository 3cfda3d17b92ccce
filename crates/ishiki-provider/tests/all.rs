//! Integration tests of `ishiki-provider`: one test binary, modules under `suite/`.

// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

mod suite;

/// The bytes this thread has asked the allocator for so far: work-counting tests compare two
/// readings (tests run on threads of their own, so others do not count).
pub(crate) fn allocated_on_this_thread() -> u64 {
    counting::ALLOCATED
        .try_with(std::cell::Cell::get)
        .unwrap_or(0)
}

// The system allocator, counting per thread. A `const` thread-local needs no allocation to
// initialise, so counting inside the allocator cannot recurse.
#[allow(unsafe_code)]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        pub(crate) static ALLOCATED: Cell<u64> = const { Cell::new(0) };
    }

    fn count(bytes: usize) {
        let _ = ALLOCATED.try_with(|total| total.set(total.get() + bytes as u64));
    }

    pub(crate) struct Counting;

    // SAFETY: every call goes to `System` with the caller's own arguments; counting touches
    // only a thread-local integer.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count(layout.size());
            // SAFETY: the caller's contract for `alloc`, passed on unchanged.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count(layout.size());
            // SAFETY: as above.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count(new_size);
            // SAFETY: as above.
            unsafe { System.realloc(ptr, layout, new_size) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: as above.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;
}
