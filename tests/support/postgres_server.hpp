#pragma once

/// `PostgresServer`: a throwaway PostgreSQL cluster for the tests, made with `initdb` once per
/// test process in a temporary directory, listening on 127.0.0.1 at an ephemeral port, and
/// stopped (its directory removed) at exit. PostgreSQL refuses to run as root, so when the
/// tests run as root the server's tools run as the `postgres` user (or `nobody`) through
/// `setpriv`. A missing binary is an error, never a skip.

#include <string>

namespace ullm::test {

class PostgresServer {
public:
    /// The process's cluster, started on first use. Throws `std::runtime_error` (naming the
    /// missing binary or the server's log) when it cannot start.
    static PostgresServer& instance();

    ~PostgresServer();
    PostgresServer(const PostgresServer&) = delete;
    PostgresServer& operator=(const PostgresServer&) = delete;

    [[nodiscard]] int port() const noexcept { return port_; }

    /// A libpq connection string for database `dbname` (user `ullm`, trust authentication).
    [[nodiscard]] std::string connection_string(const std::string& dbname) const;

    /// Creates a new empty database and returns its name.
    std::string create_database();

    /// Runs `sql` in database `dbname` through `psql`; throws when it fails.
    void sql(const std::string& dbname, const std::string& statement) const;

    /// `pg_ctl stop -m immediate`: the server dies without a goodbye, as in a crash.
    void kill();
    /// Starts the stopped server again on the same port.
    void start();

    /// Freezes the server (SIGSTOP to the postmaster and every process it started): its
    /// sockets stay open and the kernel keeps accepting bytes, but nothing answers, as with a
    /// hung host or a network that drops packets.
    void pause();
    /// Lets a paused server go on (SIGCONT).
    void resume();

private:
    PostgresServer();
    void start_once();

    std::string bin_;
    std::string dir_;
    std::string user_;
    int port_ = 0;
    int databases_ = 0;
    bool running_ = false;
};

}  // namespace ullm::test
