#pragma once

// Internal: the first-in, first-out buffer of the events a stream has decoded and not yet
// handed out.

#include <cstddef>
#include <utility>
#include <vector>

namespace ullm::detail {

/// A FIFO over one vector and a read index. Unlike `std::deque`, which gives an element larger
/// than 512 bytes (a `StreamEvent`) a heap node of its own, it allocates only when it grows past
/// the most it ever held: once a stream is under way, queueing and taking an event allocate
/// nothing. Not thread-safe.
template <typename T>
class EventQueue {
public:
    [[nodiscard]] bool empty() const noexcept { return head_ == items_.size(); }

    void push(T&& item) { items_.push_back(std::move(item)); }

    /// Takes the oldest element out; the queue must not be empty.
    [[nodiscard]] T take() {
        T item = std::move(items_[head_]);
        if (++head_ == items_.size()) clear();
        return item;
    }

    /// Appends the elements of `items`, in their order, leaving `items` empty. When the queue
    /// is empty it trades storage with `items` instead: no element is moved.
    void append(std::vector<T>& items) {
        if (empty()) {
            items_.swap(items);
            head_ = 0;
        } else {
            for (auto& item : items) items_.push_back(std::move(item));
        }
        items.clear();
    }

    /// Drops every element, keeping the storage.
    void clear() noexcept {
        items_.clear();
        head_ = 0;
    }

    /// The elements not yet taken, oldest first.
    [[nodiscard]] auto begin() const noexcept { return items_.begin() + offset(); }
    [[nodiscard]] auto end() const noexcept { return items_.end(); }

private:
    [[nodiscard]] std::ptrdiff_t offset() const noexcept {
        return static_cast<std::ptrdiff_t>(head_);
    }

    std::vector<T> items_;
    std::size_t head_ = 0;
};

}  // namespace ullm::detail
