#include "doctor.hpp"

#include "output.hpp"
#include "sessions.hpp"

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/http/curl_transport.hpp>
#include <ullm/version.hpp>

#include <fmt/core.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ullm_cli {

namespace {

namespace fs = std::filesystem;

enum class Outcome { ok, info, fail };

struct Report {
    int failures = 0;

    void line(Outcome outcome, const std::string& text) {
        const char* mark = outcome == Outcome::ok     ? "ok  "
                           : outcome == Outcome::info ? "--  "
                                                      : "FAIL";
        if (outcome == Outcome::fail) ++failures;
        fmt::print("{} {}\n", mark, text);
        std::fflush(stdout);
    }
};

std::string env(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

// `url` as it may be shown: user information (`user:password@`, which a proxy or gateway URL
// may carry) and the query (which may hold a key) hidden.
std::string shown_url(const std::string& url) {
    const auto scheme = url.find("://");
    const std::size_t host = scheme == std::string::npos ? 0 : scheme + 3;
    const auto authority_end = url.find_first_of("/?#", host);
    const std::string authority = url.substr(
        host, authority_end == std::string::npos ? std::string::npos : authority_end - host);
    const auto at = authority.rfind('@');
    std::string out = url.substr(0, host) +
                      (at == std::string::npos ? authority : "…@" + authority.substr(at + 1));
    if (authority_end != std::string::npos) {
        const std::string rest = url.substr(authority_end);
        const auto query = rest.find('?');
        out += query == std::string::npos ? rest : rest.substr(0, query) + "?…";
    }
    return out;
}

// "scheme://host[:port]" of `url`, or empty when it is not an absolute http(s) URL.
std::string origin_of(const std::string& url) {
    const auto scheme = url.find("://");
    if (scheme == std::string::npos) return {};
    const std::string name = url.substr(0, scheme);
    if (name != "http" && name != "https") return {};
    const auto end = url.find_first_of("/?#", scheme + 3);
    if (end == scheme + 3) return {};
    return url.substr(0, end);
}

struct Options {
    std::string store;
    std::vector<std::string> servers;  // --base-url
    bool network = true;
    std::chrono::milliseconds timeout{5000};
};

// A server to reach: where a provider sends its requests.
struct Server {
    std::string what;  // e.g. "openai"
    std::string url;   // the URL of a request
    bool configured;   // named by the environment or a flag (else a default, e.g. Ollama's)
};

// The URL `provider` sends a chat request to, from the provider itself.
std::string request_url(const ullm::Client& client, const std::string& provider) {
    const ullm::Route route = client.route(provider + "/probe");
    ullm::ChatRequest request;
    request.model = route.model;
    request.messages.push_back(ullm::Message::user("ping"));
    return route.provider->encode(request, false).url;
}

void check_keys(Report& report, std::vector<Server>& servers) {
    const ullm::Client client = ullm::Client::from_env();
    struct Key {
        const char* variable;
        const char* fallback;  // another variable the same provider reads
        const char* provider;
        const char* base_variable;
    };
    const Key keys[] = {{"OPENAI_API_KEY", nullptr, "openai", "OPENAI_BASE_URL"},
                        {"ANTHROPIC_API_KEY", nullptr, "anthropic", "ANTHROPIC_BASE_URL"},
                        {"GEMINI_API_KEY", "GOOGLE_API_KEY", "gemini", nullptr}};
    bool any = false;
    for (const Key& key : keys) {
        std::string variable = key.variable;
        if (env(key.variable).empty() && key.fallback != nullptr && !env(key.fallback).empty()) {
            variable = key.fallback;
        }
        if (env(variable.c_str()).empty()) {
            report.line(Outcome::info,
                        fmt::format("{} is not set: no {}/… models", key.variable, key.provider));
            continue;
        }
        any = true;
        const std::string url = request_url(client, key.provider);
        std::string routes = fmt::format("{}/… go to {}", key.provider, shown_url(url));
        if (std::string(key.provider) == "openai") {
            routes +=
                ", openai-responses/… to " + shown_url(request_url(client, "openai-responses"));
        }
        const std::string base = key.base_variable != nullptr && !env(key.base_variable).empty()
                                     ? fmt::format(" ({} is set)", key.base_variable)
                                     : "";
        report.line(Outcome::ok, fmt::format("{} is set: {}{}", variable, routes, base));
        servers.push_back({key.provider, url, true});
    }
    const bool ollama_set = !env("OLLAMA_HOST").empty();
    const std::string ollama_url = request_url(client, "ollama");
    report.line(Outcome::info,
                fmt::format("{}: ollama/… goes to {}",
                            ollama_set ? "OLLAMA_HOST is set" : "OLLAMA_HOST is not set",
                            shown_url(ollama_url)));
    servers.push_back({"ollama", ollama_url, ollama_set});
    if (!any) {
        report.line(Outcome::info,
                    "no API key is set: only ollama/…, --base-url servers and --offline work");
    }
}

void check_tls(Report& report) {
    const ullm::BuildInfo info = ullm::build_info();
    for (const char* variable : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
        const std::string path = env(variable);
        if (path.empty()) continue;
        std::error_code error;
        if (fs::is_regular_file(path, error) && ::access(path.c_str(), R_OK) == 0) {
            report.line(Outcome::ok, fmt::format("CA bundle {} (from {})", path, variable));
        } else {
            report.line(Outcome::fail, fmt::format("CA bundle {} (from {}) is not a readable file",
                                                   path, variable));
        }
        return;
    }
    const std::string& bundle = info.libcurl_ca_bundle;
    const std::string& folder = info.libcurl_ca_path;
    std::error_code error;
    if (!bundle.empty()) {
        // libcurl fails a TLS connection when the bundle it names cannot be read, whatever its
        // folder holds.
        if (fs::is_regular_file(bundle, error) && ::access(bundle.c_str(), R_OK) == 0) {
            report.line(Outcome::ok, fmt::format("CA bundle {} (libcurl's default)", bundle));
        } else {
            report.line(Outcome::fail, fmt::format("no CA bundle at {} (libcurl's default): "
                                                   "install ca-certificates, or set "
                                                   "CURL_CA_BUNDLE to a PEM file",
                                                   bundle));
        }
    } else if (folder.empty()) {
        report.line(Outcome::info,
                    "libcurl names no default CA store (its TLS library brings its own); set "
                    "CURL_CA_BUNDLE if https fails to verify");
    } else if (fs::is_directory(folder, error)) {
        report.line(Outcome::ok, fmt::format("CA certificates in {} (libcurl's default)", folder));
    } else {
        report.line(Outcome::fail, fmt::format("no CA folder at {} (libcurl's default): install "
                                               "ca-certificates, or set CURL_CA_BUNDLE",
                                               folder));
    }
}

void check_proxies(Report& report) {
    bool any = false;
    for (const char* variable : {"https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY",
                                 "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"}) {
        const std::string value = env(variable);
        if (value.empty()) continue;
        any = true;
        const bool list =
            std::string(variable) == "no_proxy" || std::string(variable) == "NO_PROXY";
        if (!list && value.find("://") == std::string::npos) {
            // libcurl takes a bare host as http://host; said so that it is no surprise.
            report.line(Outcome::info, fmt::format("{}={} (no scheme: libcurl takes http://)",
                                                   variable, shown_url(value)));
        } else {
            report.line(Outcome::info,
                        fmt::format("{}={}", variable, list ? value : shown_url(value)));
        }
    }
    if (!any) report.line(Outcome::info, "no proxy variables are set");
}

void check_store(Report& report, const std::string& path) {
    std::error_code error;
    if (fs::exists(path, error)) {
        try {
            const auto store = open_store(path);
            const auto page = store->list("", {.limit = 1000});
            report.line(Outcome::ok,
                        fmt::format("session store {}: opens, {}{} sessions", path,
                                    page.sessions.size(), page.next_cursor.empty() ? "" : "+"));
        } catch (const ullm::Error& failure) {
            report.line(Outcome::fail, fmt::format("session store {}: [ullm.{}] {}", path,
                                                   failure.code(), failure.message()));
        }
        return;
    }
    // Not created yet: the nearest folder that exists must let it be.
    fs::path folder = fs::path(path).parent_path();
    while (!folder.empty() && !fs::exists(folder, error)) folder = folder.parent_path();
    if (folder.empty()) folder = ".";
    if (fs::is_directory(folder, error) && ::access(folder.c_str(), W_OK | X_OK) == 0) {
        report.line(Outcome::ok, fmt::format("session store {}: not created yet; {} is writable",
                                             path, folder.string()));
    } else {
        report.line(Outcome::fail,
                    fmt::format("session store {}: cannot be created ({} is not writable); pass "
                                "--store or set XDG_DATA_HOME",
                                path, folder.string()));
    }
}

void check_reachable(Report& report, const std::vector<Server>& servers,
                     std::chrono::milliseconds timeout) {
    std::optional<ullm::CurlTransport> transport;
    try {
        transport.emplace();
    } catch (const ullm::Error& failure) {
        report.line(Outcome::fail, fmt::format("libcurl cannot start: [ullm.{}] {}", failure.code(),
                                               failure.message()));
        return;
    }
    std::vector<std::string> seen;
    for (const Server& server : servers) {
        const std::string origin = origin_of(server.url);
        if (origin.empty()) {
            report.line(Outcome::fail, fmt::format("{}: {} is not an http(s) URL", server.what,
                                                   shown_url(server.url)));
            continue;
        }
        bool repeated = false;
        for (const auto& done : seen) repeated = repeated || done == origin;
        if (repeated) continue;
        seen.push_back(origin);
        // A bare GET of the server's root, with no key: any HTTP answer means it is reachable.
        ullm::HttpRequest request;
        request.method = "GET";
        request.url = origin + "/";
        request.connect_timeout = timeout;
        request.idle_timeout = timeout;
        const auto started = std::chrono::steady_clock::now();
        try {
            const ullm::HttpResponse response = transport->send(request);
            const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - started);
            report.line(Outcome::ok,
                        fmt::format("{} is reachable: {} (HTTP {}, {} ms)", server.what,
                                    shown_url(origin), response.status, took.count()));
        } catch (const ullm::Error& failure) {
            report.line(server.configured ? Outcome::fail : Outcome::info,
                        fmt::format("{} is not reachable: {}: [ullm.{}] {}", server.what,
                                    shown_url(origin), failure.code(), failure.message()));
        }
    }
}

std::optional<Options> parse(const std::vector<std::string>& args) {
    Options options;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        const bool has_value = i + 1 < args.size();
        if (arg == "--store" && has_value) {
            options.store = args[++i];
        } else if (arg == "--base-url" && has_value) {
            options.servers.push_back(args[++i]);
        } else if (arg == "--no-network") {
            options.network = false;
        } else if (arg == "--timeout" && has_value) {
            const std::string& value = args[++i];
            char* end = nullptr;
            const long ms = std::strtol(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || ms < 1 || ms > 600000) {
                std::fprintf(stderr, "ullm doctor: --timeout needs milliseconds (1..600000)\n");
                return std::nullopt;
            }
            options.timeout = std::chrono::milliseconds(ms);
        } else {
            std::fprintf(stderr, "ullm doctor: unknown option %s\n", arg.c_str());
            return std::nullopt;
        }
    }
    if (options.store.empty()) options.store = default_store_path();
    return options;
}

}  // namespace

int doctor(const std::vector<std::string>& args) {
    const auto options = parse(args);
    if (!options) return exit_usage;
    Report report;
    const ullm::BuildInfo info = ullm::build_info();
    report.line(Outcome::ok, fmt::format("ullm {} with libcurl {}, SQLite {}", info.ullm,
                                         info.libcurl_runtime, info.sqlite_runtime));
    std::vector<Server> servers;
    try {
        check_keys(report, servers);
    } catch (const ullm::Error& failure) {
        // An environment the client refuses (a malformed OLLAMA_HOST, say).
        report.line(Outcome::fail, fmt::format("the environment: [ullm.{}] {}", failure.code(),
                                               failure.message()));
    }
    for (const auto& url : options->servers) servers.push_back({"--base-url", url, true});
    check_tls(report);
    check_proxies(report);
    check_store(report, options->store);
    if (options->network) {
        check_reachable(report, servers, options->timeout);
    } else {
        report.line(Outcome::info, "servers not contacted (--no-network)");
    }
    fmt::print("{}\n", report.failures == 0 ? "no problems found"
                                            : fmt::format("{} problem{} found", report.failures,
                                                          report.failures == 1 ? "" : "s"));
    return report.failures == 0 ? 0 : 1;
}

}  // namespace ullm_cli
