#pragma once

/// `Executor`: where ullm runs the completions of async calls.

#include <functional>

namespace ullm {

/// Runs posted work later, once each, on threads of its own. Async calls take one in
/// `AsyncOptions::executor` to run their callbacks (an application's event loop, a GUI queue,
/// an asio strand behind a small adapter); without one they use their client's callback
/// thread. Implementations are thread-safe, never run `work` inside `post`, and accept posts
/// until every call that uses them has completed.
class Executor {
public:
    virtual ~Executor() = default;

    /// Queues `work`. Must not throw; `work` does not throw either (ullm catches inside it).
    virtual void post(std::function<void()> work) noexcept = 0;
};

}  // namespace ullm
