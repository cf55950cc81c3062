// Kill-during-write and multi-process tests of the stores that persist: a writer process is
// killed with SIGKILL at varying moments, and the record it leaves must be one whole snapshot.

#include <ullm/core/error.hpp>
#include <ullm/store/file_session_store.hpp>
#include <ullm/store/session_store.hpp>
#include <ullm/store/sqlite_session_store.hpp>

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/temp_dir.hpp"

namespace session_store_crash_test {

namespace fs = std::filesystem;
using ullm::test::TempDir;

namespace {

using StoreFactory = std::function<std::shared_ptr<ullm::SessionStore>()>;

constexpr std::size_t snapshot_bytes = std::size_t{1024} * 1024;
constexpr const char* tenant = "crash";
constexpr const char* session_id = "big-session";

// A 1 MiB snapshot that repeats the version it was written as, so that any mix of two
// versions, or a cut, is visible.
std::string snapshot_for(std::uint64_t version) {
    std::string out = "{v=" + std::to_string(version) + "}";
    out.reserve(2 * snapshot_bytes);
    while (out.size() < snapshot_bytes) out += out;  // Doubling: cheap even in a Debug build.
    out.resize(snapshot_bytes);
    return out;
}

// Runs `body` in a child process and returns its pid. The child leaves through `_exit` with
// the body's result (99 for an exception), so it never returns into the test runner and never
// runs the parent's exit handlers.
template <class Body>
pid_t spawn(Body body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        int status = 99;
        try {
            status = body();
        } catch (const std::exception& error) {
            std::fprintf(stderr, "child %d failed: %s\n", static_cast<int>(::getpid()),
                         error.what());
        } catch (...) {
            std::fprintf(stderr, "child %d failed\n", static_cast<int>(::getpid()));
        }
        ::_exit(status);
    }
    return pid;
}

// The child's loop: once the store is open, says so on `ready`, then writes larger and larger
// versions as fast as the store takes them, until killed.
[[noreturn]] void write_until_killed(const StoreFactory& open, int ready) {
    const auto store = open();
    const auto current = store->get(tenant, session_id);
    std::uint64_t version = current ? current->version : 0;
    const char byte = 1;
    if (::write(ready, &byte, 1) != 1) ::_exit(98);
    ::close(ready);
    for (;;) version = store->put(tenant, session_id, snapshot_for(version + 1), version);
}

using std::chrono::microseconds;

// Writes version `version + 1` and returns how long the put took.
microseconds timed_put(ullm::SessionStore& store, std::uint64_t version) {
    const std::string snapshot = snapshot_for(version + 1);
    const auto start = std::chrono::steady_clock::now();
    CHECK(store.put(tenant, session_id, snapshot, version) == version + 1);
    return std::chrono::duration_cast<microseconds>(std::chrono::steady_clock::now() - start);
}

void check_kill_during_write(const StoreFactory& open) {
    const unsigned seed = std::random_device{}();
    INFO("seed " << seed);
    std::mt19937 random(seed);
    // Kills land within about three puts of the child starting to write; a put's time depends
    // on the disk and on sanitizers, so it is measured rather than assumed.
    microseconds put_time = timed_put(*open(), 0);
    std::uint64_t floor = 1;  // The version the parent itself wrote last.
    int rounds_with_progress = 0;
    for (int round = 0; round < 20; ++round) {
        int ready[2] = {-1, -1};
        REQUIRE(::pipe(ready) == 0);
        const pid_t child = spawn([&]() -> int {
            ::close(ready[0]);
            write_until_killed(open, ready[1]);
        });
        REQUIRE(child > 0);
        ::close(ready[1]);
        char byte = 0;
        const bool child_ready = ::read(ready[0], &byte, 1) == 1;
        ::close(ready[0]);
        // Before, inside and between writes.
        const auto window = static_cast<unsigned>(3 * put_time.count() + 1000);
        const auto delay = microseconds(random() % window);
        if (child_ready) std::this_thread::sleep_for(delay);
        REQUIRE(::kill(child, SIGKILL) == 0);
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        INFO("round " << round << ", killed after " << delay.count() << " us, status " << status);
        // Anything but death by SIGKILL means the writer failed on its own.
        REQUIRE(WIFSIGNALED(status));
        REQUIRE(WTERMSIG(status) == SIGKILL);

        const auto store = open();
        const auto stored = store->get(tenant, session_id);
        REQUIRE(stored.has_value());
        const std::uint64_t version = stored->version;
        CHECK(version >= floor);
        REQUIRE(stored->snapshot.size() == snapshot_bytes);
        const bool whole_snapshot_of_its_version = stored->snapshot == snapshot_for(version);
        CHECK(whole_snapshot_of_its_version);
        if (version > floor) ++rounds_with_progress;
        // The store is usable at once: the next versioned put goes through.
        put_time = (put_time + timed_put(*store, version)) / 2;
        floor = version + 1;
    }
    CHECK(rounds_with_progress > 0);
}

std::size_t count_temp_files(const fs::path& root) {
    std::size_t count = 0;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.path().filename().string().rfind(".tmp-", 0) == 0) ++count;
    }
    return count;
}

// `processes` children each make `wins_each` successful versioned puts, reloading after every
// conflict. No lost update: the final version is the sum of all successes.
void check_processes_race(const StoreFactory& open) {
    constexpr int processes = 4;
    constexpr int wins_each = 10;
    std::vector<pid_t> children;
    for (int p = 0; p < processes; ++p) {
        children.push_back(spawn([&open, p]() -> int {
            const auto store = open();
            int wins = 0;
            while (wins < wins_each) {
                const auto current = store->get("race", "shared");
                const std::uint64_t seen = current ? current->version : 0;
                try {
                    store->put("race", "shared",
                               "process " + std::to_string(p) + " after " + std::to_string(seen),
                               seen);
                    ++wins;
                } catch (const ullm::SessionStoreConflictError&) {
                    // Someone else won this version: reload and try again.
                }
            }
            return 0;
        }));
        REQUIRE(children.back() > 0);
    }
    for (const pid_t child : children) {
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    const auto stored = open()->get("race", "shared");
    REQUIRE(stored.has_value());
    CHECK(stored->version == static_cast<std::uint64_t>(processes * wins_each));
}

}  // namespace

TEST_CASE("FileSessionStore leaves a whole snapshot when its writer is killed mid-write",
          "[session_store][crash]") {
    const TempDir dir("file-crash");
    const fs::path root = dir / "store";
    check_kill_during_write([&] { return ullm::FileSessionStore::open(root); });
    // Killed writers leave temporary files; the next listing removes them.
    const auto page = ullm::FileSessionStore::open(root)->list(tenant);
    REQUIRE(page.sessions.size() == 1);
    CHECK(count_temp_files(root) == 0);
}

TEST_CASE("SqliteSessionStore leaves a whole snapshot when its writer is killed mid-write",
          "[session_store][crash]") {
    const TempDir dir("sqlite-crash");
    const std::string path = (dir / "sessions.db").string();
    check_kill_during_write([&] { return ullm::SqliteSessionStore::open(path); });
}

TEST_CASE("FileSessionStore serialises versioned puts from several processes",
          "[session_store][crash]") {
    const TempDir dir("file-processes");
    check_processes_race([&] { return ullm::FileSessionStore::open(dir / "store"); });
}

TEST_CASE("SqliteSessionStore serialises versioned puts from several processes",
          "[session_store][crash]") {
    const TempDir dir("sqlite-processes");
    const std::string path = (dir / "sessions.db").string();
    check_processes_race([&] { return ullm::SqliteSessionStore::open(path); });
}

}  // namespace session_store_crash_test
