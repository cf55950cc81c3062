#pragma once

// The stdio transport of MCP: a child process started with posix_spawn in a process group of
// its own, its stdin, stdout and stderr on pipes (O_CLOEXEC on every end this process keeps),
// a reader thread that polls stdout and stderr, splits stdout into lines bounded in size and
// keeps the tail of stderr. Internal to src/mcp.

#include <ullm/mcp/mcp_client.hpp>

#include "mcp_transport.hpp"

#include <sys/types.h>
#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace ullm::detail::mcp {

class StdioProcess final : public McpTransport {
public:
    // Spawns `options.command`; throws McpError mcp_spawn_failed. Does not start reading.
    explicit StdioProcess(const McpStdioOptions& options);
    ~StdioProcess() override;
    StdioProcess(const StdioProcess&) = delete;
    StdioProcess& operator=(const StdioProcess&) = delete;

    // Starts the reader thread; the handlers run on it: each complete line of stdout, and at
    // most one failure (the server's output ended, a line too long), after which it stops.
    void start(TransportHandlers handlers) override;

    // Writes `line` and a newline to the child's stdin, waiting for room until `deadline`.
    // Throws McpError mcp_server_exited (stdin closed) or mcp_timeout. Thread-safe.
    void write_line(const std::string& line,
                    std::chrono::steady_clock::time_point deadline) override;

    // Closes stdin, waits for the child, then SIGTERM and SIGKILL to its group, reaps it, stops
    // the reader thread and closes every descriptor. Idempotent. Must not run on the reader
    // thread.
    void close() noexcept override;

    [[nodiscard]] int pid() const noexcept override { return static_cast<int>(pid_); }
    [[nodiscard]] std::string stderr_tail() const override;
    // "exit status N" / "killed by signal N" once the child has exited, else empty.
    [[nodiscard]] std::string exit_description() const;

private:
    void read_loop();
    void feed_stdout(const char* data, std::size_t size);
    void append_stderr(const char* data, std::size_t size);
    [[nodiscard]] bool wait_exit(std::chrono::milliseconds timeout);
    void fail(const McpError& failure);

    std::size_t max_message_bytes_;
    std::size_t max_stderr_bytes_;
    std::chrono::milliseconds shutdown_grace_;
    pid_t pid_ = -1;
    int stdin_fd_ = -1;
    int stdout_fd_ = -1;
    int stderr_fd_ = -1;
    int wake_read_fd_ = -1;
    int wake_write_fd_ = -1;
    TransportHandlers handlers_;
    std::thread reader_;
    std::string line_;          // the reader's partial line
    bool failed_ = false;       // reader thread only
    mutable std::mutex mutex_;  // guards stderr_tail_, closed_, status_
    std::string stderr_tail_;
    bool closed_ = false;
    bool exited_ = false;
    int status_ = 0;
    std::mutex write_mutex_;  // one writer at a time; guards stdin_fd_
};

}  // namespace ullm::detail::mcp
