// ullm_bench_session_store: the cost of a versioned put and of a get of a ~50 KB snapshot (a
// long conversation) in the SQLite store, with the file and in-memory stores for comparison,
// on a temporary directory of this machine. Every put is durable (fsync), so the figures say
// as much about the disk as about the store. Prints its figures; build it in Release.

#include <ullm/store/file_session_store.hpp>
#include <ullm/store/memory_session_store.hpp>
#include <ullm/store/session_store.hpp>
#include <ullm/store/sqlite_session_store.hpp>

#include <fmt/core.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr std::size_t snapshot_bytes = 50000;

// A JSON-looking snapshot of about `bytes` bytes whose text changes with `version`.
std::string snapshot_for(std::uint64_t version) {
    std::string out = R"({"format":"ullm.conversation","version":1,"messages":[)";
    for (int i = 0; out.size() < snapshot_bytes - 200; ++i) {
        out += R"({"role":"user","content":"message )" + std::to_string(i) + " of turn " +
               std::to_string(version) + R"(: the quick brown fox jumps over the lazy dog"},)";
    }
    out += R"({"role":"assistant","content":"done"}]})";
    return out;
}

struct Figures {
    double median_us = 0;
    double p90_us = 0;
    double mean_us = 0;
};

Figures summarise(std::vector<double> samples_us) {
    std::sort(samples_us.begin(), samples_us.end());
    Figures f;
    double total = 0;
    for (const double s : samples_us) total += s;
    f.mean_us = total / static_cast<double>(samples_us.size());
    f.median_us = samples_us[samples_us.size() / 2];
    f.p90_us = samples_us[samples_us.size() * 9 / 10];
    return f;
}

void report(const char* store, const char* operation, const Figures& f, std::size_t count) {
    fmt::print("  {:<14} {:<26} median {:9.1f} us   p90 {:9.1f} us   mean {:9.1f} us   ({} ops)\n",
               store, operation, f.median_us, f.p90_us, f.mean_us, count);
}

double elapsed_us(Clock::time_point start) {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// Puts `count` versions of one session, then gets it `count` times; also times creating
// `count` fresh sessions.
void bench(const char* name, ullm::SessionStore& store, std::size_t count) {
    std::vector<std::string> snapshots;
    for (std::uint64_t v = 1; v <= 8; ++v) snapshots.push_back(snapshot_for(v));

    std::vector<double> creates;
    for (std::size_t i = 0; i < count; ++i) {
        const auto start = Clock::now();
        store.put("bench", "fresh-" + std::to_string(i), snapshots[i % snapshots.size()], 0);
        creates.push_back(elapsed_us(start));
    }
    std::vector<double> updates;
    std::uint64_t version = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const auto start = Clock::now();
        version = store.put("bench", "long-chat", snapshots[i % snapshots.size()], version);
        updates.push_back(elapsed_us(start));
    }
    std::vector<double> gets;
    for (std::size_t i = 0; i < count; ++i) {
        const auto start = Clock::now();
        const auto stored = store.get("bench", "long-chat");
        gets.push_back(elapsed_us(start));
        if (!stored || stored->version != version) {
            throw std::runtime_error("the session is not what was written");
        }
    }
    std::vector<double> lists;
    for (std::size_t i = 0; i < std::min<std::size_t>(count, 50); ++i) {
        const auto start = Clock::now();
        const auto page = store.list("bench", {.limit = 100});
        lists.push_back(elapsed_us(start));
        if (page.sessions.empty()) throw std::runtime_error("nothing listed");
    }
    report(name, "put (create)", summarise(creates), creates.size());
    report(name, "put (update, versioned)", summarise(updates), updates.size());
    report(name, "get", summarise(gets), gets.size());
    report(name, "list (first 100 of many)", summarise(lists), lists.size());
}

}  // namespace

int main(int argc, char** argv) try {
    // An optional directory argument puts the stores on another disk.
    const fs::path base = argc > 1 ? fs::path(argv[1]) : fs::temp_directory_path();
    const fs::path dir = base / ("ullm-store-bench-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    constexpr std::size_t count = 300;
    fmt::print("ullm_bench_session_store: {} B snapshot, {} ops each, in {}\n",
               snapshot_for(1).size(), count, dir.string());
    {
        const auto sqlite = ullm::SqliteSessionStore::open((dir / "sessions.db").string());
        bench("sqlite", *sqlite, count);
        const auto file = ullm::FileSessionStore::open(dir / "files");
        bench("file", *file, count);
        const auto in_memory = ullm::SqliteSessionStore::open(":memory:");
        bench("sqlite:memory:", *in_memory, count);
        ullm::MemorySessionStore memory;
        bench("memory", memory, count);
    }
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "ullm_bench_session_store: %s\n", error.what());
    return 1;
}
