#include "stdio_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace ullm::detail::mcp {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t read_chunk = std::size_t{64} * 1024;
// How long the reader waits for the rest of stderr, and for the exit status, after stdout ends.
constexpr auto drain_wait = std::chrono::milliseconds(300);

void close_fd(int& fd) noexcept {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

// Closes both ends of each pipe made so far when spawning fails half-way.
struct Pipes {
    std::array<int, 2> in{-1, -1};
    std::array<int, 2> out{-1, -1};
    std::array<int, 2> err{-1, -1};
    ~Pipes() {
        for (auto* pair : {&in, &out, &err}) {
            close_fd((*pair)[0]);
            close_fd((*pair)[1]);
        }
    }
};

void make_pipe(std::array<int, 2>& ends) {
    if (::pipe2(ends.data(), O_CLOEXEC) != 0) {
        throw McpError(ErrorCode::mcp_spawn_failed,
                       std::string("could not make a pipe: ") + std::strerror(errno));
    }
}

int milliseconds_until(Clock::time_point deadline) {
    if (deadline == Clock::time_point::max()) return -1;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return static_cast<int>(
        std::clamp<std::chrono::milliseconds::rep>(left.count() + 1, 0, 60'000));
}

std::vector<std::string> child_environment(const McpStdioOptions& options) {
    std::map<std::string, std::string> variables;
    if (options.inherit_environment) {
        for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
            const std::string text(*entry);
            const auto equals = text.find('=');
            if (equals != std::string::npos)
                variables[text.substr(0, equals)] = text.substr(equals + 1);
        }
    } else {
        for (const char* name : {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG"}) {
            if (const char* value = std::getenv(name)) variables[name] = value;
        }
    }
    for (const auto& [name, value] : options.environment) variables[name] = value;
    std::vector<std::string> out;
    out.reserve(variables.size());
    for (const auto& [name, value] : variables) out.push_back(name + "=" + value);
    return out;
}

// The spawn attributes and file actions, destroyed on every path.
struct SpawnSetup {
    posix_spawnattr_t attributes{};
    posix_spawn_file_actions_t actions{};
    SpawnSetup() {
        posix_spawnattr_init(&attributes);
        posix_spawn_file_actions_init(&actions);
    }
    ~SpawnSetup() {
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attributes);
    }
    SpawnSetup(const SpawnSetup&) = delete;
    SpawnSetup& operator=(const SpawnSetup&) = delete;
};

}  // namespace

StdioProcess::StdioProcess(const McpStdioOptions& options)
    : max_message_bytes_(options.max_message_bytes),
      max_stderr_bytes_(options.max_stderr_bytes),
      shutdown_grace_(options.shutdown_grace) {
    if (options.command.empty() || options.command.front().empty()) {
        throw McpError(ErrorCode::mcp_spawn_failed, "the MCP server command is empty");
    }
    Pipes pipes;
    make_pipe(pipes.in);
    make_pipe(pipes.out);
    make_pipe(pipes.err);
    std::array<int, 2> wake{-1, -1};
    make_pipe(wake);
    wake_read_fd_ = wake[0];
    wake_write_fd_ = wake[1];

    SpawnSetup setup;
    // The child's ends become its 0, 1 and 2 (dup2 clears O_CLOEXEC on them); every other
    // descriptor of ours is O_CLOEXEC and closes at exec.
    posix_spawn_file_actions_adddup2(&setup.actions, pipes.in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&setup.actions, pipes.out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&setup.actions, pipes.err[1], STDERR_FILENO);
    if (!options.working_directory.empty()) {
        posix_spawn_file_actions_addchdir_np(&setup.actions, options.working_directory.c_str());
    }
    // A process group of its own, so that close() reaches the server's own children; default
    // signal dispositions and an empty mask, whatever this process set.
    sigset_t empty_mask;
    sigemptyset(&empty_mask);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    posix_spawnattr_setpgroup(&setup.attributes, 0);
    posix_spawnattr_setsigmask(&setup.attributes, &empty_mask);
    posix_spawnattr_setsigdefault(&setup.attributes, &defaults);
    posix_spawnattr_setflags(
        &setup.attributes,
        static_cast<short>(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF));

    std::vector<std::string> arguments = options.command;
    std::vector<char*> argv;
    argv.reserve(arguments.size() + 1);
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::vector<std::string> environment = child_environment(options);
    std::vector<char*> envp;
    envp.reserve(environment.size() + 1);
    for (auto& variable : environment) envp.push_back(variable.data());
    envp.push_back(nullptr);

    const int result =
        ::posix_spawnp(&pid_, argv[0], &setup.actions, &setup.attributes, argv.data(), envp.data());
    if (result != 0) {
        close_fd(wake_read_fd_);
        close_fd(wake_write_fd_);
        throw McpError(ErrorCode::mcp_spawn_failed, "could not start the MCP server \"" +
                                                        options.command.front() +
                                                        "\": " + std::strerror(result));
    }
    stdin_fd_ = std::exchange(pipes.in[1], -1);
    stdout_fd_ = std::exchange(pipes.out[0], -1);
    stderr_fd_ = std::exchange(pipes.err[0], -1);
    for (int fd : {stdin_fd_, stdout_fd_, stderr_fd_, wake_read_fd_}) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
}

StdioProcess::~StdioProcess() {
    close();
}

void StdioProcess::start(TransportHandlers handlers) {
    handlers_ = std::move(handlers);
    reader_ = std::thread([this] { read_loop(); });
}

void StdioProcess::write_line(const std::string& line, Clock::time_point deadline) {
    const std::string message = line + "\n";
    std::lock_guard lock(write_mutex_);
    if (stdin_fd_ < 0) {
        throw McpError(ErrorCode::mcp_server_exited, "the connection to the MCP server is closed");
    }
    // A write to a pipe whose reader is gone raises SIGPIPE: block it on this thread, and take
    // back the one the write raised, so that the process is never killed by it.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    sigset_t old_mask;
    pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
    sigset_t pending;
    sigpending(&pending);
    const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
    std::size_t written = 0;
    int error = 0;
    while (written < message.size()) {
        const ssize_t n = ::write(stdin_fd_, message.data() + written, message.size() - written);
        if (n > 0) {
            written += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd target{stdin_fd_, POLLOUT, 0};
            const int ready = ::poll(&target, 1, milliseconds_until(deadline));
            if (ready == 0 && Clock::now() >= deadline) {
                error = ETIMEDOUT;
                break;
            }
            continue;
        }
        error = n < 0 ? errno : EPIPE;
        break;
    }
    if (error == EPIPE && !was_pending) {
        const timespec no_wait{};
        sigtimedwait(&pipe_signal, nullptr, &no_wait);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    if (error == ETIMEDOUT) {
        throw McpError(ErrorCode::mcp_timeout, "the MCP server did not read its input in time");
    }
    if (error != 0) {
        std::string text = "the MCP server closed its input";
        if (const auto exit = exit_description(); !exit.empty()) text += " (" + exit + ")";
        throw McpError(ErrorCode::mcp_server_exited, text + ": " + std::strerror(error));
    }
}

void StdioProcess::read_loop() {
    std::vector<char> buffer(read_chunk);
    bool stderr_open = true;
    Clock::time_point stdout_ended{};
    bool stdout_open = true;
    while (!failed_) {
        std::array<pollfd, 3> fds{pollfd{wake_read_fd_, POLLIN, 0},
                                  pollfd{stdout_open ? stdout_fd_ : -1, POLLIN, 0},
                                  pollfd{stderr_open ? stderr_fd_ : -1, POLLIN, 0}};
        int timeout = -1;
        if (!stdout_open) {
            timeout = milliseconds_until(stdout_ended + drain_wait);
            if (!stderr_open || timeout == 0) break;
        }
        const int ready = ::poll(fds.data(), fds.size(), timeout);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) break;
        if (fds[0].revents != 0) return;  // close() asked the reader to stop
        if (fds[2].revents != 0) {
            const ssize_t n = ::read(stderr_fd_, buffer.data(), buffer.size());
            if (n > 0) append_stderr(buffer.data(), static_cast<std::size_t>(n));
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) stderr_open = false;
        }
        if (fds[1].revents != 0) {
            const ssize_t n = ::read(stdout_fd_, buffer.data(), buffer.size());
            if (n > 0) feed_stdout(buffer.data(), static_cast<std::size_t>(n));
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                stdout_open = false;
                stdout_ended = Clock::now();
            }
        }
    }
    if (failed_) return;
    // stdout ended: tell why, with the exit status when the child has exited by now.
    const auto give_up = Clock::now() + drain_wait;
    std::string exit;
    while ((exit = exit_description()).empty() && Clock::now() < give_up) {
        siginfo_t info{};
        if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == pid_) {
            std::lock_guard lock(mutex_);
            status_ = info.si_code == CLD_EXITED ? info.si_status : -info.si_status;
            exited_ = true;
            exit = info.si_code == CLD_EXITED
                       ? "exit status " + std::to_string(info.si_status)
                       : "killed by signal " + std::to_string(info.si_status);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string text =
        exit.empty() ? "the MCP server closed its output" : "the MCP server exited (" + exit + ")";
    if (const auto tail = stderr_tail(); !tail.empty()) text += "; its stderr ends: " + tail;
    fail(McpError(ErrorCode::mcp_server_exited, text));
}

void StdioProcess::fail(const McpError& failure) {
    failed_ = true;
    if (handlers_.on_failure) handlers_.on_failure(failure);
}

void StdioProcess::feed_stdout(const char* data, std::size_t size) {
    std::size_t start = 0;
    while (start < size && !failed_) {
        const void* found = std::memchr(data + start, '\n', size - start);
        const std::size_t end =
            found == nullptr ? size
                             : static_cast<std::size_t>(static_cast<const char*>(found) - data);
        if (line_.size() + (end - start) > max_message_bytes_) {
            line_.clear();
            line_.shrink_to_fit();
            fail(McpError(ErrorCode::mcp_message_too_large,
                          "the MCP server sent a message over " +
                              std::to_string(max_message_bytes_) +
                              " bytes (McpStdioOptions::max_message_bytes)"));
            return;
        }
        line_.append(data + start, end - start);
        if (found == nullptr) return;
        start = end + 1;
        if (!line_.empty() && line_.back() == '\r') line_.pop_back();
        if (!line_.empty() && handlers_.on_line) handlers_.on_line(line_);
        line_.clear();
    }
}

void StdioProcess::append_stderr(const char* data, std::size_t size) {
    std::lock_guard lock(mutex_);
    stderr_tail_.append(data, size);
    if (stderr_tail_.size() > max_stderr_bytes_) {
        stderr_tail_.erase(0, stderr_tail_.size() - max_stderr_bytes_);
    }
}

std::string StdioProcess::stderr_tail() const {
    std::lock_guard lock(mutex_);
    return valid_utf8(stderr_tail_);
}

std::string StdioProcess::exit_description() const {
    std::lock_guard lock(mutex_);
    if (!exited_) return {};
    if (status_ >= 0) return "exit status " + std::to_string(status_);
    return "killed by signal " + std::to_string(-status_);
}

bool StdioProcess::wait_exit(std::chrono::milliseconds timeout) {
    const auto give_up = Clock::now() + timeout;
    for (;;) {
        siginfo_t info{};
        if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == pid_) {
            return true;
        }
        if (errno == ECHILD) return true;  // reaped by someone else: nothing to wait for
        if (Clock::now() >= give_up) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

void StdioProcess::close() noexcept {
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
    }
    {
        std::lock_guard lock(write_mutex_);
        close_fd(stdin_fd_);  // the polite request: end of input
    }
    if (pid_ > 0) {
        if (!wait_exit(shutdown_grace_)) {
            ::kill(-pid_, SIGTERM);
            if (!wait_exit(shutdown_grace_)) ::kill(-pid_, SIGKILL);
        }
        // Whatever the server left in its group goes too; the group id cannot be reused while
        // its leader is an unreaped zombie.
        ::kill(-pid_, SIGKILL);
        int status = 0;
        pid_t reaped = -1;
        do {
            reaped = ::waitpid(pid_, &status, 0);
        } while (reaped < 0 && errno == EINTR);
        std::lock_guard lock(mutex_);
        if (reaped == pid_) {
            exited_ = true;
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        }
    }
    if (reader_.joinable()) {
        const char stop = 1;
        [[maybe_unused]] const ssize_t n = ::write(wake_write_fd_, &stop, 1);
        reader_.join();
    }
    close_fd(stdout_fd_);
    close_fd(stderr_fd_);
    close_fd(wake_read_fd_);
    close_fd(wake_write_fd_);
}

}  // namespace ullm::detail::mcp
