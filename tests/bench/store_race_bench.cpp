// ullm_bench_store_race: two processes × 8 threads writing one session through a shared store
// (PostgreSQL, then Redis, each a throwaway server started here), every write a read, an
// append of the writer's token and a versioned put. Each writer counts its commits and its
// version conflicts; at the end every committed token must be in the final snapshot and the
// final version must equal the number of commits: a token missing is a lost update. Prints the
// counts.

#include <ullm/core/error.hpp>
#include <ullm/store/postgres_session_store.hpp>
#include <ullm/store/redis_session_store.hpp>
#include <ullm/store/session_store.hpp>

#include <fmt/core.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/postgres_server.hpp"
#include "support/redis_server.hpp"

namespace {

constexpr int processes = 2;
constexpr int threads = 8;
constexpr int writes_per_thread = 50;

using Factory = std::function<std::shared_ptr<ullm::SessionStore>()>;

struct Counts {
    long commits = 0;
    long conflicts = 0;
    long errors = 0;
};

// One process's writers; returns its counts.
Counts run_writers(const Factory& open, int process) {
    const auto store = open();
    std::atomic<long> commits{0};
    std::atomic<long> conflicts{0};
    std::atomic<long> errors{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            for (int i = 0; i < writes_per_thread;) {
                const std::string token = "p" + std::to_string(process) + "t" + std::to_string(t) +
                                          "i" + std::to_string(i) + ";";
                try {
                    const auto stored = store->get("race", "one");
                    const std::uint64_t version = stored ? stored->version : 0;
                    store->put("race", "one", (stored ? stored->snapshot : "") + token, version);
                    ++commits;
                    ++i;
                } catch (const ullm::SessionStoreConflictError&) {
                    ++conflicts;
                } catch (const ullm::Error&) {
                    ++errors;
                    ++i;
                }
            }
        });
    }
    for (auto& thread : pool) thread.join();
    return {commits.load(), conflicts.load(), errors.load()};
}

void race(const char* name, const Factory& open) {
    std::vector<pid_t> children;
    std::vector<int> pipes;
    for (int p = 0; p < processes; ++p) {
        int fds[2];
        if (::pipe(fds) != 0) throw std::runtime_error("pipe");
        const pid_t pid = ::fork();
        if (pid == 0) {
            ::close(fds[0]);
            const Counts counts = run_writers(open, p);
            const std::string line = std::to_string(counts.commits) + " " +
                                     std::to_string(counts.conflicts) + " " +
                                     std::to_string(counts.errors) + "\n";
            (void)!::write(fds[1], line.data(), line.size());
            ::_exit(0);
        }
        ::close(fds[1]);
        children.push_back(pid);
        pipes.push_back(fds[0]);
    }
    Counts total;
    for (std::size_t p = 0; p < children.size(); ++p) {
        char buffer[128] = {};
        const ssize_t got = ::read(pipes[p], buffer, sizeof buffer - 1);
        ::close(pipes[p]);
        int status = 0;
        ::waitpid(children[p], &status, 0);
        long commits = 0;
        long conflicts = 0;
        long errors = 0;
        if (got > 0 && std::sscanf(buffer, "%ld %ld %ld", &commits, &conflicts, &errors) == 3) {
            total.commits += commits;
            total.conflicts += conflicts;
            total.errors += errors;
        }
    }
    const auto final_state = open()->get("race", "one");
    const std::string snapshot = final_state ? final_state->snapshot : "";
    long tokens = 0;
    for (const char c : snapshot) tokens += c == ';' ? 1 : 0;
    const long version = final_state ? static_cast<long>(final_state->version) : 0;
    fmt::print(
        "{:<9} {} processes x {} threads: {} commits, {} version conflicts, {} errors; final "
        "version {}, {} tokens in the snapshot: {} lost updates\n",
        name, processes, threads, total.commits, total.conflicts, total.errors, version, tokens,
        total.commits - tokens);
}

}  // namespace

int main() {
    try {
        // Both servers start before any fork or thread.
        auto& postgres = ullm::test::PostgresServer::instance();
        auto& redis = ullm::test::RedisServer::instance();
        const std::string db = postgres.create_database();
        race("postgres", [&] {
            return ullm::PostgresSessionStore::open(
                {.connection_string = postgres.connection_string(db), .pool_size = threads});
        });
        const std::string prefix = redis.fresh_prefix();
        race("redis", [&] {
            return ullm::RedisSessionStore::open(
                {.port = redis.port(), .key_prefix = prefix, .pool_size = threads});
        });
    } catch (const std::exception& error) {
        std::fprintf(stderr, "ullm_bench_store_race: %s\n", error.what());
        return 1;
    }
    return 0;
}
