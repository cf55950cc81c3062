#pragma once

// The terminal side of `ullm chat`: Ctrl-C as an event (not a kill), and a spinner while the
// model has not answered yet.

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ullm_cli {

// Turns SIGINT into a call of the current handler, on a thread of its own. Call `install()`
// before any other thread starts: it blocks SIGINT in the calling thread (and so in every
// thread started after it) and waits for it on its own thread.
class Interrupts {
public:
    static void install();
    // Runs `handler` on each Ctrl-C until replaced.
    static void on_interrupt(std::function<void()> handler);
};

// Prints an animated "thinking" line on a terminal until stopped; prints nothing when stdout
// is not a terminal.
class Spinner {
public:
    explicit Spinner(bool enabled);
    ~Spinner();
    Spinner(const Spinner&) = delete;
    Spinner& operator=(const Spinner&) = delete;
    // Stops and erases the line. Idempotent.
    void stop();

private:
    std::atomic<bool> running_{false};
    std::thread thread_;
};

}  // namespace ullm_cli
