#pragma once

/// `RedisServer`: a throwaway redis-server for the tests, started once per test process on
/// 127.0.0.1 at a free port with persistence off (`--save '' --appendonly no`) in a temporary
/// directory, and stopped at exit. A missing binary is an error, never a skip.

#include <sys/types.h>

#include <string>

namespace ullm::test {

class RedisServer {
public:
    /// The process's server, started on first use. Throws `std::runtime_error` when it cannot
    /// start (naming the missing binary).
    static RedisServer& instance();

    ~RedisServer();
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    [[nodiscard]] int port() const noexcept { return port_; }

    /// A new key prefix, so that each store of a test sees an empty keyspace.
    std::string fresh_prefix();

    /// Sends one command given as RESP text (e.g. "*1\r\n$8\r\nFLUSHALL\r\n") and returns the
    /// first line of the answer.
    std::string raw(const std::string& resp) const;

    /// `SIGKILL`: the server dies without saving, as in a crash.
    void kill();
    /// Starts the killed server again on the same port.
    void start();

private:
    RedisServer();
    void start_once();

    std::string dir_;
    int port_ = 0;
    pid_t pid_ = -1;
    int prefixes_ = 0;
};

}  // namespace ullm::test
