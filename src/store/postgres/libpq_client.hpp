#pragma once

// Internal to the PostgreSQL components (session store, usage ledger): libpq connections in a
// bounded pool, binary parameters and results, and errors that never show the password.

#include <ullm/store/postgres_session_store.hpp>

#include "../connection_pool.hpp"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ullm::detail::pg {

inline constexpr Oid text_oid = 25;
inline constexpr Oid bytea_oid = 17;
inline constexpr Oid int8_oid = 20;

struct ConnDeleter {
    void operator()(PGconn* conn) const noexcept { PQfinish(conn); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

struct ResultDeleter {
    void operator()(PGresult* result) const noexcept { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// A bound parameter, sent in binary form: text and bytea as their bytes, bigint as 8
// big-endian bytes.
struct Param {
    Oid type;
    std::string bytes;
    bool null = false;  ///< SQL NULL (of `type`)
};

inline Param text_param(std::string_view value) {
    return {text_oid, std::string(value)};
}
inline Param bytea_param(std::string_view value) {
    return {bytea_oid, std::string(value)};
}
inline Param int8_param(std::int64_t value) {
    std::string bytes(8, '\0');
    auto bits = static_cast<std::uint64_t>(value);
    for (int i = 7; i >= 0; --i) {
        bytes[static_cast<std::size_t>(i)] = static_cast<char>(bits & 0xFFU);
        bits >>= 8U;
    }
    return {int8_oid, std::move(bytes)};
}

inline std::int64_t read_int8(const PGresult* result, int row, int column) {
    const char* data = PQgetvalue(result, row, column);
    std::uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) {
        bits = (bits << 8U) | static_cast<unsigned char>(data[i]);
    }
    return static_cast<std::int64_t>(bits);
}

inline std::string read_bytes(const PGresult* result, int row, int column) {
    return {PQgetvalue(result, row, column),
            static_cast<std::size_t>(PQgetlength(result, row, column))};
}

// PostgreSQL's binary COPY format: the header (signature, flags, no extension), one tuple per
// `append_copy_tuple`, then the trailer.
inline constexpr std::string_view copy_header{"PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19};
inline constexpr std::string_view copy_trailer{"\377\377", 2};

inline void append_be(std::string& out, std::uint32_t value, int bytes) {
    for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8) {
        out.push_back(static_cast<char>((value >> static_cast<unsigned>(shift)) & 0xFFU));
    }
}

// Appends one tuple of `fields` (each in its binary form, as bound parameters are) to `out`.
inline void append_copy_tuple(std::string& out, const std::vector<Param>& fields) {
    append_be(out, static_cast<std::uint32_t>(fields.size()), 2);
    for (const Param& field : fields) {
        if (field.null) {
            append_be(out, 0xFFFFFFFFU, 4);
            continue;
        }
        append_be(out, static_cast<std::uint32_t>(field.bytes.size()), 4);
        out += field.bytes;
    }
}

// `text` with every occurrence of `secret` replaced, so that a password can never leak through
// a server or libpq message.
inline std::string without(std::string text, const std::string& secret) {
    if (secret.empty()) return text;
    for (std::size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
        text.replace(at, secret.size(), "***");
        at += 3;
    }
    return text;
}

inline std::string trim_message(std::string message) {
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
        message.pop_back();
    }
    std::replace(message.begin(), message.end(), '\n', ' ');
    return message;
}

// The connection string's parsed keywords that describe where it goes, and its password.
struct Target {
    std::string description;
    std::string password;
};

template <class StoreError>
Target parse_target(const std::string& connection_string, const std::string& label) {
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(connection_string.c_str(), &error);
    if (options == nullptr) {
        // libpq's parse errors quote pieces of the string, which may be the password.
        PQfreemem(error);
        throw StoreError(label +
                         ": the connection string is malformed (its text is not shown, since it "
                         "may hold a password)");
    }
    std::string host;
    std::string port;
    std::string dbname;
    Target target;
    for (const PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
        if (option->val == nullptr) continue;
        const std::string_view keyword = option->keyword;
        if (keyword == "host" || (keyword == "hostaddr" && host.empty())) host = option->val;
        if (keyword == "port") port = option->val;
        if (keyword == "dbname") dbname = option->val;
        if (keyword == "password") target.password = option->val;
    }
    PQconninfoFree(options);
    target.description = (host.empty() ? std::string("localhost") : host) + ":" +
                         (port.empty() ? std::string("5432") : port) + "/" + dbname;
    return target;
}

/// A pool of connections to one server and the statements run on them. `StoreError` is the
/// error type thrown (constructed from a message and a retryable flag); `label` starts every
/// message.
template <class StoreError>
struct Client {
    std::string label;
    PostgresStoreOptions options;
    Target target;

    detail::ConnectionPool<Conn> pool;

    // Checks `options` and takes them, with `label`: the set-up both components share.
    // Throws `StoreError` for an invalid option or a malformed connection string.
    void configure(std::string name, const PostgresStoreOptions& settings) {
        if (settings.pool_size < 1 || settings.pool_size > 64) {
            throw StoreError(name + ": the pool size must be 1..64, not " +
                             std::to_string(settings.pool_size));
        }
        if (settings.read_timeout.count() <= 0) {
            throw StoreError(name + ": the read timeout must be positive");
        }
        target = parse_target<StoreError>(settings.connection_string, name);
        label = std::move(name);
        options = settings;
        pool.size = settings.pool_size;
        pool.wait = settings.checkout_timeout;
    }

    [[noreturn]] void fail(const std::string& what, const std::string& detail,
                           bool retryable) const {
        throw StoreError(label + " " + target.description + ": cannot " + what + ": " +
                             without(trim_message(detail), target.password),
                         retryable);
    }

    Conn connect() {
        const std::string timeout = std::to_string(std::max(2, options.connect_timeout_seconds));
        // Keywords after the expanded connection string override it; those before are defaults.
        const std::array<const char*, 6> keywords{"connect_timeout", "application_name", "dbname",
                                                  "client_encoding", nullptr};
        const std::array<const char*, 6> values{timeout.c_str(), "ullm",
                                                options.connection_string.c_str(), "UTF8", nullptr};
        Conn conn(PQconnectdbParams(keywords.data(), values.data(), 1));
        if (conn == nullptr) fail("connect", "out of memory", true);
        if (PQstatus(conn.get()) != CONNECTION_OK) {
            fail("connect", PQerrorMessage(conn.get()), true);
        }
        // The server's notices ("already exists, skipping", shutdown warnings) are not ours to
        // print; errors arrive with their results.
        PQsetNoticeProcessor(
            conn.get(), [](void*, const char*) {}, nullptr);
        // Statements are sent without waiting and their answers awaited with a deadline
        // (`await_result`), so a server that stops answering fails the call, not hangs it.
        if (PQsetnonblocking(conn.get(), 1) != 0) {
            fail("configure a connection", PQerrorMessage(conn.get()), true);
        }
        const std::string settings =
            "SET statement_timeout = " + std::to_string(options.statement_timeout.count()) +
            "; SET lock_timeout = " + std::to_string(options.statement_timeout.count());
        run_sql(conn.get(), settings.c_str(), "configure a connection");
        return conn;
    }

    // Runs `sql` (statements without parameters, text results); throws on failure.
    Result run_sql(PGconn* conn, const char* sql, const std::string& what) {
        return check(conn, await_result(conn, PQsendQuery(conn, sql), what), what);
    }

    // Ends the transaction a failed call left open, when the connection still works. Never
    // throws: the call's own error is the one to report, and a connection left inside a
    // transaction is not kept.
    void rollback(PGconn* conn) noexcept {
        if (PQstatus(conn) != CONNECTION_OK) return;
        try {
            run_sql(conn, "ROLLBACK", "roll back");
        } catch (...) {
        }
    }

    // The answer to the statement just sent on `conn` (`sent`: what the PQsend* call
    // returned): its first error, else its last result, as PQexec would return; or the
    // PGRES_COPY_IN result of a `COPY … FROM STDIN`, which waits for the caller's data. Waits
    // at most `options.read_timeout` for the server; past that, the connection is closed (so
    // the pool drops it) and the call fails as retryable.
    Result await_result(PGconn* conn, int sent, const std::string& what) {
        if (sent != 1) fail(what, PQerrorMessage(conn), true);
        const auto deadline = std::chrono::steady_clock::now() + options.read_timeout;
        flush(conn, deadline, what);
        Result answer;
        bool failed = false;
        for (;;) {
            while (PQisBusy(conn) != 0) {
                wait_for_server(conn, POLLIN, deadline, what);
                if (PQconsumeInput(conn) == 0) break;  // PQgetResult reports the failure
            }
            Result next(PQgetResult(conn));
            if (next == nullptr) break;
            const ExecStatusType status = PQresultStatus(next.get());
            if (status == PGRES_COPY_IN && !failed) return next;
            if (failed) continue;
            failed = status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK;
            answer = std::move(next);
            if (PQstatus(conn) != CONNECTION_OK) break;
        }
        return answer;
    }

    // Sends what libpq holds for the server, or fails at `deadline`.
    void flush(PGconn* conn, std::chrono::steady_clock::time_point deadline,
               const std::string& what) {
        until_sent(
            conn,
            [conn] {
                const int unsent = PQflush(conn);  // 0 all sent, 1 some left, -1 failed
                return unsent < 0 ? -1 : (unsent == 0 ? 1 : 0);
            },
            deadline, what);
    }

    // Repeats `attempt`, a non-blocking libpq send that returns 1 when done, 0 when libpq's
    // buffer is full and -1 on failure, waiting for the server to take more between tries;
    // fails at `deadline`.
    template <typename Attempt>
    void until_sent(PGconn* conn, Attempt&& attempt, std::chrono::steady_clock::time_point deadline,
                    const std::string& what) {
        for (int sent = attempt(); sent != 1; sent = attempt()) {
            if (sent < 0) fail(what, PQerrorMessage(conn), true);
            wait_for_server(conn, POLLIN | POLLOUT, deadline, what);
            if (PQconsumeInput(conn) == 0) fail(what, PQerrorMessage(conn), true);
        }
    }

    // Runs `sql`, a `COPY … FROM STDIN`, with the data `produce` gives: it is called with an
    // empty buffer until it returns false, and what it appended each time is sent (in the
    // statement's format). Throws on failure, with the statement's error when the server
    // refused the data. Each wait has the read deadline.
    template <typename Produce>
    Result copy_in(PGconn* conn, const char* sql, Produce&& produce, const std::string& what) {
        Result started = await_result(conn, PQsendQuery(conn, sql), what);
        if (PQresultStatus(started.get()) != PGRES_COPY_IN) {
            return check(conn, std::move(started), what);
        }
        std::string chunk;
        for (bool more = true; more;) {
            chunk.clear();
            more = produce(chunk);
            until_sent(
                conn,
                [&] { return PQputCopyData(conn, chunk.data(), static_cast<int>(chunk.size())); },
                std::chrono::steady_clock::now() + options.read_timeout, what);
        }
        until_sent(
            conn, [conn] { return PQputCopyEnd(conn, nullptr); },
            std::chrono::steady_clock::now() + options.read_timeout, what);
        return check(conn, await_result(conn, 1, what), what);
    }

    // Waits until `conn`'s socket is ready for `events`, or fails at `deadline`.
    void wait_for_server(PGconn* conn, short events, std::chrono::steady_clock::time_point deadline,
                         const std::string& what) {
        const int socket = PQsocket(conn);
        if (socket < 0) fail(what, PQerrorMessage(conn), true);
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            pollfd waiting{socket, events, 0};
            const int ready =
                left.count() <= 0 ? 0 : ::poll(&waiting, 1, static_cast<int>(left.count()) + 1);
            if (ready > 0) return;
            if (ready < 0 && errno == EINTR) continue;
            if (ready < 0) fail(what, "poll failed", true);
            if (std::chrono::steady_clock::now() < deadline) continue;
            // The server went silent (stopped, or the network drops packets): closing the
            // socket makes libpq see the connection broken.
            ::shutdown(socket, SHUT_RDWR);
            (void)PQconsumeInput(conn);
            fail(what,
                 "the server did not answer within " +
                     std::to_string(options.read_timeout.count()) +
                     " ms (read_timeout); the connection was closed",
                 true);
        }
    }

    // The parameters of `params` as libpq takes them (all binary).
    struct Bound {
        std::vector<Oid> types;
        std::vector<const char*> values;
        std::vector<int> lengths;
        std::vector<int> formats;

        explicit Bound(const std::vector<Param>& params) {
            for (const Param& param : params) {
                types.push_back(param.type);
                values.push_back(param.null ? nullptr : param.bytes.data());
                lengths.push_back(static_cast<int>(param.bytes.size()));
                formats.push_back(1);
            }
        }
    };

    // Runs one statement with binary parameters and binary results; throws on failure.
    Result exec(PGconn* conn, const char* sql, const std::vector<Param>& params,
                const std::string& what) {
        const Bound bound(params);
        Result result = await_result(
            conn,
            PQsendQueryParams(conn, sql, static_cast<int>(params.size()), bound.types.data(),
                              bound.values.data(), bound.lengths.data(), bound.formats.data(), 1),
            what);
        return check(conn, std::move(result), what);
    }

    // Runs the statement prepared on this connection as `name`, preparing it from `sql` first
    // when the connection does not have it yet (a new connection, or one of a restarted
    // server). Outside a transaction only: the failed first try would abort one.
    Result exec_prepared(PGconn* conn, const char* name, const char* sql,
                         const std::vector<Param>& params, const std::string& what) {
        const Bound bound(params);
        const auto run = [&] {
            return await_result(conn,
                                PQsendQueryPrepared(conn, name, static_cast<int>(params.size()),
                                                    bound.values.data(), bound.lengths.data(),
                                                    bound.formats.data(), 1),
                                what);
        };
        Result result = run();
        const char* state =
            result != nullptr ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
        // 26000: no prepared statement of that name on this connection.
        if (state != nullptr && std::string_view(state) == "26000") {
            prepare(conn, name, sql, static_cast<int>(params.size()), bound.types.data());
            result = run();
        }
        return check(conn, std::move(result), what);
    }

    // Prepares `sql` on `conn` as `name`; throws on failure.
    void prepare(PGconn* conn, const char* name, const char* sql, int count, const Oid* types) {
        const std::string what = "prepare a statement";
        check(conn, await_result(conn, PQsendPrepare(conn, name, sql, count, types), what), what);
    }

    // `result` when it succeeded; otherwise throws the mapped error.
    Result check(PGconn* conn, Result result, const std::string& what) {
        const ExecStatusType status = PQresultStatus(result.get());
        if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) return result;
        const char* state =
            result != nullptr ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
        const std::string sqlstate = state != nullptr ? state : "";
        // A lost connection, a server shutting down or starting, a timeout, a lock or
        // serialisation failure: trying again later may work.
        const bool retryable = PQstatus(conn) != CONNECTION_OK || sqlstate.rfind("08", 0) == 0 ||
                               sqlstate.rfind("57", 0) == 0 || sqlstate == "40001" ||
                               sqlstate == "40P01" || sqlstate == "55P03" || sqlstate == "53300";
        std::string detail = PQerrorMessage(conn);
        if (!sqlstate.empty()) detail += " (sqlstate " + sqlstate + ")";
        fail(what, detail, retryable);
    }

    // Runs `body(conn)` on a pooled connection; one that broke or was left inside a
    // transaction is not kept.
    template <typename Body>
    auto with_connection(Body&& body) {
        return pool.run(
            [&] { return connect(); },
            [&] {
                fail("get a connection",
                     "all " + std::to_string(options.pool_size) + " connections stayed busy for " +
                         std::to_string(options.checkout_timeout.count()) + " ms",
                     true);
            },
            [](PGconn* conn) {
                return PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) == PQTRANS_IDLE;
            },
            std::forward<Body>(body));
    }
};

}  // namespace ullm::detail::pg
