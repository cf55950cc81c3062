// ullm_bench_store_latency: put and get p50/p99 of a 1,000-message snapshot (about 110 KB) in
// the SQLite store (a temporary file, synchronous=FULL), PostgreSQL and Redis (throwaway
// servers started here on 127.0.0.1, without fsync and without persistence respectively, so
// their figures are the store's and the network's, not a disk's). Prints its figures; build
// it in Release.

#include <ullm/store/postgres_session_store.hpp>
#include <ullm/store/redis_session_store.hpp>
#include <ullm/store/session_store.hpp>
#include <ullm/store/sqlite_session_store.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/postgres_server.hpp"
#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int rounds = 300;

std::string snapshot_for(std::uint64_t version) {
    std::string out = R"({"format":"ullm.conversation","version":1,"messages":[)";
    for (int i = 0; i < 1000; ++i) {
        out += R"({"role":")" + std::string(i % 2 == 0 ? "user" : "assistant") +
               R"(","content":"message )" + std::to_string(i) + " of turn " +
               std::to_string(version) + R"(: the quick brown fox jumps over the lazy dog"})";
        out += i == 999 ? "]}" : ",";
    }
    return out;
}

double percentile(std::vector<double> samples, double p) {
    std::sort(samples.begin(), samples.end());
    return samples[static_cast<std::size_t>(p * static_cast<double>(samples.size() - 1))];
}

void measure(const char* name, ullm::SessionStore& store) {
    std::vector<double> puts;
    std::vector<double> gets;
    std::uint64_t version = 0;
    const std::string snapshot = snapshot_for(0);
    for (int i = 0; i < rounds; ++i) {
        auto start = Clock::now();
        version = store.put("bench", "one", snapshot, version);
        puts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        start = Clock::now();
        const auto stored = store.get("bench", "one");
        gets.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        if (!stored || stored->snapshot.size() != snapshot.size()) {
            throw std::runtime_error("the snapshot did not come back");
        }
    }
    fmt::print("{:<9} put p50 {:8.0f} us  p99 {:8.0f} us   get p50 {:8.0f} us  p99 {:8.0f} us\n",
               name, percentile(puts, 0.5), percentile(puts, 0.99), percentile(gets, 0.5),
               percentile(gets, 0.99));
}

}  // namespace

int main() {
    try {
        fmt::print("{} rounds of a {}-byte snapshot (1,000 messages)\n", rounds,
                   snapshot_for(0).size());
        const ullm::test::TempDir dir("store-latency");
        measure("sqlite", *ullm::SqliteSessionStore::open((dir / "s.db").string()));
        auto& postgres = ullm::test::PostgresServer::instance();
        measure("postgres",
                *ullm::PostgresSessionStore::open(
                    {.connection_string = postgres.connection_string(postgres.create_database())}));
        auto& redis = ullm::test::RedisServer::instance();
        measure("redis", *ullm::RedisSessionStore::open(
                             {.port = redis.port(), .key_prefix = redis.fresh_prefix()}));
    } catch (const std::exception& error) {
        std::fprintf(stderr, "ullm_bench_store_latency: %s\n", error.what());
        return 1;
    }
    return 0;
}
