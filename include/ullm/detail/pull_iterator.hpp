#pragma once

// The input iterator of the pull-based streams (`ChatStream`, `ConversationStream`).

#include <ullm/providers/chat.hpp>

#include <cstddef>
#include <iterator>
#include <optional>

namespace ullm::detail {

/// An input iterator over a stream whose `next()` returns the next event or nullopt at the
/// end; reaching the end means the stream completed. Pulls one event ahead.
template <class Stream>
class PullIterator {
public:
    using iterator_category = std::input_iterator_tag;
    using value_type = StreamEvent;
    using difference_type = std::ptrdiff_t;
    using pointer = const StreamEvent*;
    using reference = const StreamEvent&;

    PullIterator() = default;
    explicit PullIterator(Stream* stream) : stream_(stream) { ++*this; }
    reference operator*() const { return *current_; }
    pointer operator->() const { return &*current_; }
    PullIterator& operator++() {
        current_ = stream_->next();
        return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const PullIterator& it, std::default_sentinel_t) {
        return !it.current_.has_value();
    }

private:
    Stream* stream_ = nullptr;
    std::optional<StreamEvent> current_;
};

}  // namespace ullm::detail
