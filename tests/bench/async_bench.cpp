// ullm_bench_async: many async calls through one Client against the perf mock
// (tests/bench/perf/mock_server.cpp, started here on a free loopback port), with a window of
// calls in flight: `complete_async` calls, or `stream_async` streams of `--events` text deltas
// each. Prints calls per second, the CPU per call, the threads ullm started (named ullm-*), the
// peak RSS, and checks every answer's text byte for byte. Then the time from a stop request to
// the completion of a call the server never answers.
//
//   ullm_bench_async [--calls N] [--in-flight K] [--stream] [--events E] [--mock PATH]

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
#include <thread>
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
    bool streams = false;
    int events = 200;
    std::string mock = ULLM_BENCH_MOCK_SERVER;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        const auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
        if (flag == "--calls") calls = std::stoul(value());
        if (flag == "--in-flight") in_flight = std::stoul(value());
        if (flag == "--stream") streams = true;
        if (flag == "--events") events = std::stoi(value());
        if (flag == "--mock") mock = value();
    }
    // A thousand connections need more descriptors than the usual soft limit of 1,024.
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
    const int port = ullm::test::free_loopback_port();
    const pid_t server = ullm::test::spawn_quiet(
        {mock, "--port", std::to_string(port), "--events", std::to_string(events)}, {});
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
    const std::string expected = perf::expected_text(streams ? events : perf::kUnaryWords);

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
        // One call ended: counted, checked, and the next one started.
        auto ended = [&](const ullm::Result<ullm::ChatResponse>& result, const std::string& text) {
            {
                std::lock_guard lock(mutex);
                ++finished;
                if (!result || text != expected) {
                    ++wrong;
                    if (first_error.empty()) {
                        first_error = result ? "wrong text" : result.error_code();
                    }
                }
                if (finished == calls) {
                    // Under the lock: main may return as soon as it is released.
                    changed.notify_all();
                    return;
                }
            }
            start_one();
        };
        if (!streams) {
            client.complete_async(request, [ended](ullm::Result<ullm::ChatResponse> result) {
                ended(result, result ? result.value().text : std::string());
            });
            return;
        }
        auto text = std::make_shared<std::string>();
        client.stream_async(request, {[text](const ullm::StreamEvent& event) {
                                          if (const auto* delta = event.text_delta())
                                              *text += *delta;
                                      },
                                      [ended, text](ullm::Result<ullm::ChatResponse> result) {
                                          ended(result, *text);
                                      }});
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

    // Cancel latency: a call to a port where a listener never answers, stopped after 50 ms.
    double cancel_ms = -1;
    {
        const int silent_port = ullm::test::free_loopback_port();
        const pid_t silent = ullm::test::spawn_quiet(
            {"/usr/bin/python3", "-c",
             "import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,"
             "socket.SO_REUSEADDR,1)\ns.bind(('127.0.0.1'," +
                 std::to_string(silent_port) + "))\ns.listen(8)\nc=s.accept()\ntime.sleep(60)"},
            {});
        if (silent > 0 && ullm::test::wait_until_accepting(silent_port, std::chrono::seconds(10))) {
            auto quiet = std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
                .api_key = "sk-bench",
                .base_url = "http://127.0.0.1:" + std::to_string(silent_port) + "/v1"});
            const ullm::Client waiting({.providers = {quiet}});
            std::stop_source stop;
            auto future = waiting.complete_async(request, {.stop = stop.get_token()});
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            const auto asked = std::chrono::steady_clock::now();
            stop.request_stop();
            future.wait();
            cancel_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked)
                    .count();
        }
        if (silent > 0) {
            kill(silent, SIGKILL);
            waitpid(silent, nullptr, 0);
        }
    }

    fmt::print("ullm_bench_async: {} {}, {} in flight, one Client\n", calls,
               streams ? fmt::format("stream_async streams of {} events", events)
                       : std::string("complete_async calls"),
               in_flight);
    fmt::print("  wall {:.2f} s, {:.0f} calls/s\n", wall, static_cast<double>(calls) / wall);
    fmt::print("  client CPU {:.1f} us per call (user+sys of the whole process)\n",
               cpu * 1e6 / static_cast<double>(calls));
    fmt::print("  threads named ullm-*: {} at most\n", peak_threads);
    fmt::print("  peak RSS {:.1f} MB\n", static_cast<double>(max_rss_kb()) / 1024.0);
    fmt::print("  answers with the exact text: {} of {}{}\n", calls - wrong, calls,
               first_error.empty() ? "" : " (first problem: " + first_error + ")");
    fmt::print("  a stop request to a silent server's call completed it in {:.2f} ms\n", cancel_ms);
    return wrong == 0 ? 0 : 1;
}
