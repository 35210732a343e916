// Storage: aligned allocation and release. See storage.h.
#include "storage.h"

#include <new>

namespace ember {

static constexpr std::align_val_t kAlignment{64};

Storage::Storage(size_t nbytes) : nbytes_(nbytes) {
    // operator new with an alignment throws std::bad_alloc on failure; a size
    // of zero still returns a unique pointer, so data() is never null.
    data_ = ::operator new(nbytes == 0 ? 1 : nbytes, kAlignment);
}

Storage::~Storage() { ::operator delete(data_, kAlignment); }

} // namespace ember
