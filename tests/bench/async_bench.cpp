// ullm_bench_async: many `complete_async` calls through one Client against the perf mock
// (tests/bench/perf/mock_server.cpp, started here on a free loopback port), with a window of
// calls in flight. Prints calls per second, the CPU per call, the threads ullm started (named
// ullm-*), the peak RSS, and checks every answer's text byte for byte.
//
//   ullm_bench_async [--calls N] [--in-flight K] [--mock PATH]

#include <ullm/client/client.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <fmt/core.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include <dirent.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "perf/drivers/words.hpp"
#include "support/server_process.hpp"

namespace {

double cpu_seconds() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const auto seconds = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
    };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

long max_rss_kb() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss;
}

// The threads of this process whose name starts with "ullm-".
int ullm_threads() {
    int count = 0;
    DIR* tasks = opendir("/proc/self/task");
    if (tasks == nullptr) return -1;
    while (const dirent* entry = readdir(tasks)) {
        if (entry->d_name[0] == '.') continue;
        std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        if (name.rfind("ullm-", 0) == 0) ++count;
    }
    closedir(tasks);
    return count;
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t calls = 10000;
    std::size_t in_flight = 256;
    std::string mock = ULLM_BENCH_MOCK_SERVER;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--calls") calls = std::stoul(argv[i + 1]);
        if (flag == "--in-flight") in_flight = std::stoul(argv[i + 1]);
        if (flag == "--mock") mock = argv[i + 1];
    }
    const int port = ullm::test::free_loopback_port();
    const pid_t server = ullm::test::spawn_quiet({mock, "--port", std::to_string(port)}, {});
    if (server < 0 || !ullm::test::wait_until_accepting(port, std::chrono::seconds(10))) {
        fmt::print(stderr, "ullm_bench_async: the mock server ({}) did not start\n", mock);
        return 1;
    }
    const auto stop_server = [server] {
        kill(server, SIGTERM);
        waitpid(server, nullptr, 0);
    };

    auto provider = std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
        .api_key = "sk-bench", .base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1"});
    const ullm::Client client({.providers = {provider}});
    ullm::ChatRequest request;
    request.model = "gpt-4o-mini";
    request.messages = {ullm::Message::user("Say something.")};
    const std::string expected = perf::expected_text(perf::kUnaryWords);

    std::mutex mutex;
    std::condition_variable changed;
    std::size_t started = 0;
    std::size_t finished = 0;
    std::size_t wrong = 0;
    std::string first_error;
    int peak_threads = 0;

    // Each completion starts the next call: `in_flight` calls are running until the end.
    std::function<void()> start_one;
    start_one = [&] {
        {
            std::lock_guard lock(mutex);
            if (started == calls) return;
            ++started;
        }
        client.complete_async(request, [&](ullm::Result<ullm::ChatResponse> result) {
            {
                std::lock_guard lock(mutex);
                ++finished;
                if (!result || result.value().text != expected) {
                    ++wrong;
                    if (first_error.empty()) {
                        first_error = result ? "wrong text" : result.error_code();
                    }
                }
            }
            changed.notify_all();
            start_one();
        });
    };

    const auto wall_started = std::chrono::steady_clock::now();
    const double cpu_started = cpu_seconds();
    for (std::size_t i = 0; i < std::min(in_flight, calls); ++i) start_one();
    {
        std::unique_lock lock(mutex);
        while (finished < calls) {
            changed.wait_for(lock, std::chrono::milliseconds(50));
            peak_threads = std::max(peak_threads, ullm_threads());
        }
    }
    const double cpu = cpu_seconds() - cpu_started;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_started).count();
    stop_server();

    fmt::print("ullm_bench_async: {} complete_async calls, {} in flight, one Client\n", calls,
               in_flight);
    fmt::print("  wall {:.2f} s, {:.0f} calls/s\n", wall, static_cast<double>(calls) / wall);
    fmt::print("  client CPU {:.1f} us per call (user+sys of the whole process)\n",
               cpu * 1e6 / static_cast<double>(calls));
    fmt::print("  threads named ullm-*: {} at most\n", peak_threads);
    fmt::print("  peak RSS {:.1f} MB\n", static_cast<double>(max_rss_kb()) / 1024.0);
    fmt::print("  answers with the exact text: {} of {}{}\n", calls - wrong, calls,
               first_error.empty() ? "" : " (first problem: " + first_error + ")");
    return wrong == 0 ? 0 : 1;
}
