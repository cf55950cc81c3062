// Measurement harness shared by the C++ drivers. A driver implements one function,
// `bool one(const perf::Args&, perf::Outcome&)`, that performs ONE request (or one fully
// consumed stream) of a.scenario, and calls perf::run_driver(name, argc, argv, one).
//
// Command line (same for every driver):
//   DRIVER --port P --scenario S --k K [--n N] [--warmup W] [--host H]
// Scenarios: <family>-unary, <family>-stream with family oai (OpenAI Chat Completions), ant
// (Anthropic Messages), gem (Google Gemini generateContent), rsp (OpenAI Responses).
// (ullm's in-tree copy of ../shared/perf/drivers/common.hpp: adds gem and rsp, Args::family.)
// Output: one JSON line {driver, scenario, requests, events, cpu_user_s, cpu_sys_s,
//   wall_s, max_rss_kb, ok[, error]}; exit 0 iff ok.
// CPU is getrusage(RUSAGE_SELF) (all threads) around the K measured iterations only,
// after W un-measured warm-up iterations in the same process.
#pragma once
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "words.hpp"

namespace perf {

struct Args {
    std::string host = "127.0.0.1";
    int port = 0;
    std::string scenario;
    int k = 100;
    int n = 200;      // events per stream
    int warmup = -1;  // default: min(100, max(5, k/10))
    bool streaming() const { return scenario.find("stream") != std::string::npos; }
    // "oai", "ant", "gem" or "rsp": the scenario's prefix, the API it talks to.
    std::string family() const { return scenario.substr(0, scenario.find('-')); }
    bool openai_chat() const { return scenario.rfind("oai-", 0) == 0; }
    bool anthropic() const { return scenario.rfind("ant-", 0) == 0; }
    bool gemini() const { return scenario.rfind("gem-", 0) == 0; }
    bool responses() const { return scenario.rfind("rsp-", 0) == 0; }
    bool known() const {
        return (openai_chat() || anthropic() || gemini() || responses()) &&
               (scenario.compare(4, std::string::npos, "unary") == 0 ||
                scenario.compare(4, std::string::npos, "stream") == 0);
    }
    std::string base() const { return "http://" + host + ":" + std::to_string(port); }
};

struct Outcome {
    long events = 0;    // content deltas seen (streams)
    std::string text;   // concatenated / returned text
    std::string error;  // set on failure
};

inline Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        auto v = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "missing value for %s\n", k.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (k == "--port") a.port = std::atoi(v().c_str());
        else if (k == "--host") a.host = v();
        else if (k == "--scenario") a.scenario = v();
        else if (k == "--k") a.k = std::atoi(v().c_str());
        else if (k == "--n") a.n = std::atoi(v().c_str());
        else if (k == "--warmup") a.warmup = std::atoi(v().c_str());
        else {
            std::fprintf(stderr, "unknown argument %s\n", k.c_str());
            std::exit(2);
        }
    }
    if (a.warmup < 0) a.warmup = a.k / 10 < 5 ? 5 : (a.k / 10 > 100 ? 100 : a.k / 10);
    return a;
}

inline double tv_s(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

inline std::string json_str(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') { o += '\\'; o += static_cast<char>(c); }
        else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
        else o += static_cast<char>(c);
    }
    return o + "\"";
}

template <class One>
int run_driver(const char* name, int argc, char** argv, One&& one) {
    Args a = parse_args(argc, argv);
    if (!a.known()) {
        std::printf("{\"unsupported\":true}\n");
        return 3;
    }
    const std::string expect =
        expected_text(a.streaming() ? a.n : kUnaryWords);
    std::string error;
    auto iterate = [&](int count, long& events) {
        for (int i = 0; i < count && error.empty(); ++i) {
            Outcome o;
            bool ok = one(a, o);
            if (!ok || !o.error.empty()) error = o.error.empty() ? "request failed" : o.error;
            else if (o.text != expect) error = "text mismatch (got " + std::to_string(o.text.size()) + " bytes)";
            else if (a.streaming() && o.events != a.n)
                error = "event count " + std::to_string(o.events) + " != " + std::to_string(a.n);
            events += o.events;
        }
    };
    long warm_events = 0, events = 0;
    iterate(a.warmup, warm_events);
    rusage r0{}, r1{};
    getrusage(RUSAGE_SELF, &r0);
    auto w0 = std::chrono::steady_clock::now();
    iterate(a.k, events);
    auto w1 = std::chrono::steady_clock::now();
    getrusage(RUSAGE_SELF, &r1);
    std::printf(
        "{\"driver\":%s,\"scenario\":%s,\"requests\":%d,\"events\":%ld,\"cpu_user_s\":%.6f,"
        "\"cpu_sys_s\":%.6f,\"wall_s\":%.6f,\"max_rss_kb\":%ld,\"ok\":%s%s%s}\n",
        json_str(name).c_str(), json_str(a.scenario).c_str(), a.k, events,
        tv_s(r1.ru_utime) - tv_s(r0.ru_utime), tv_s(r1.ru_stime) - tv_s(r0.ru_stime),
        std::chrono::duration<double>(w1 - w0).count(), r1.ru_maxrss, error.empty() ? "true" : "false",
        error.empty() ? "" : ",\"error\":", error.empty() ? "" : json_str(error).c_str());
    std::fflush(stdout);
    return error.empty() ? 0 : 1;
}

// Request bodies every driver sends (same content across drivers).
inline const char* kSystemPrompt = "You are a concise assistant that answers questions about the weather.";
inline const char* kUserPrompt =
    "Write a short paragraph about the weather in Paris in June, mentioning temperature and rain.";
inline const char* kOaiModel = "gpt-4o-mini";
inline const char* kAntModel = "claude-sonnet-4-20250514";
inline const char* kGemModel = "gemini-2.5-flash";

}  // namespace perf
