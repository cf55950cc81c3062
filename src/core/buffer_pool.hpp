#pragma once

// Internal: byte buffers kept between the streams that use them one after another.

#include <cstddef>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ullm::detail {

/// Spare byte buffers. A stream takes one when it starts and gives it back when it ends, so
/// that its bytes land in storage that earlier streams already grew, rather than in fresh
/// memory that the allocator takes from the system and hands back after every stream (a
/// dozen page faults and a `brk` or `madvise` each time). Keeps at most `max_buffers`, each of
/// at most `max_bytes`; a larger one is freed. Thread-safe.
class BufferPool {
public:
    static constexpr std::size_t max_buffers = 16;
    static constexpr std::size_t max_bytes = std::size_t{1} << 20;

    /// An empty buffer, with storage when one was kept.
    [[nodiscard]] std::string take() {
        std::lock_guard lock(mutex_);
        if (spare_.empty()) return {};
        std::string buffer = std::move(spare_.back());
        spare_.pop_back();
        return buffer;
    }

    /// Keeps `buffer`'s storage for a later `take`, emptied.
    void give(std::string&& buffer) noexcept {
        if (buffer.capacity() == 0 || buffer.capacity() > max_bytes) return;
        buffer.clear();
        std::lock_guard lock(mutex_);
        if (spare_.size() < max_buffers) spare_.push_back(std::move(buffer));
    }

private:
    std::mutex mutex_;
    std::vector<std::string> spare_;
};

}  // namespace ullm::detail
