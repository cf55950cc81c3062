// `ullm`: the command-line face of the library.
//
//   ullm chat [options]              an interactive chat in the terminal
//   ullm send [options] [PROMPT...]  one prompt (or stdin), for scripts
//   ullm embed [options] [TEXT...]   embeddings of texts (or of stdin's lines), as JSON
//   ullm sessions [--store PATH]     the stored sessions
//   ullm show ID [--store PATH]      a session's transcript as Markdown
//   ullm decode --provider NAME [--status N] FILE
//   ullm doctor [--store PATH] [--base-url URL]... [--no-network] [--timeout MS]
//   ullm usage [--ledger PATH | --postgres URL] [--by KEY]... [--since WHEN] [--until WHEN]
//              [--tenant T] [--csv | --jsonl]
//   ullm version
//
// Exit status: 0 on success, 1 when a session, store or provider fails, 2 when there is no
// model to talk to (or, for decode, the file is not a transcript), 64 for bad usage.

#include "chat.hpp"
#include "decode.hpp"
#include "doctor.hpp"
#include "output.hpp"
#include "sessions.hpp"
#include "usage.hpp"

#include <ullm/version.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using ullm_cli::exit_usage;

const char* const usage_text =
    "usage: ullm chat [options]               chat in the terminal\n"
    "       ullm send [options] [PROMPT...]   one prompt (or stdin); --json prints the response\n"
    "       ullm embed [options] [TEXT...]    embeddings of the texts (or of stdin's lines)\n"
    "       ullm sessions [--store PATH]      list the stored sessions\n"
    "       ullm show ID [--store PATH]       print a session as Markdown\n"
    "       ullm decode --provider NAME [--status N] FILE\n"
    "       ullm doctor [--store PATH] [--base-url URL]... [--no-network] [--timeout MS]\n"
    "                                         check keys, CA store, proxies, store and servers\n"
    "       ullm usage [--ledger PATH | --postgres URL] [--by KEY]... [--since WHEN]\n"
    "                  [--until WHEN] [--tenant T] [--csv | --jsonl]\n"
    "                                         totals of the usage ledger (KEY: model, day,\n"
    "                                         session, provider, tenant, hour; WHEN: ISO 8601,\n"
    "                                         UTC unless it says; default ledger:\n"
    "                                         $XDG_DATA_HOME/ullm/usage.db or\n"
    "                                         ~/.local/share/ullm/usage.db)\n"
    "       ullm version\n"
    "\n"
    "chat and send options:\n"
    "  --model NAME          the model (default: by the API key found)\n"
    "  --provider NAME       openai, anthropic, gemini, ollama, … (or the name of --base-url)\n"
    "  --base-url URL        an OpenAI-compatible server, e.g. http://localhost:11434/v1\n"
    "  --api-key-env VAR     send the key in VAR to --base-url\n"
    "  --system TEXT         the system prompt\n"
    "  --session ID          resume (or start) this session\n"
    "  --store PATH          the SQLite session store (default: $XDG_DATA_HOME/ullm/sessions.db\n"
    "                        or ~/.local/share/ullm/sessions.db)\n"
    "  --budget USD          cap the session's spend; --on-budget throw|warn|skip\n"
    "  --max-tool-rounds N   tool rounds per turn (0..100, default 5)\n"
    "  --window N            send only the last N messages\n"
    "  --allow-dir DIR       let the model read text files under DIR\n"
    "  --mcp 'COMMAND ARGS'  add the tools of an MCP server started over stdio (words split\n"
    "                        at spaces; repeat for more servers; see docs/mcp.md)\n"
    "  --mcp-url URL         add the tools of an MCP server over Streamable HTTP\n"
    "  --no-tools            no tools (current_time and calculate are on by default)\n"
    "  --offline             a scripted model: no network, no key\n"
    "  --no-history          chat: keep no history of typed lines (default: STORE.history)\n"
    "  --ledger PATH         record each request's usage in this SQLite ledger (ullm usage)\n"
    "\n"
    "send also takes\n"
    "  --schema FILE         answer as JSON matching the JSON Schema in FILE, checked (prints it)\n"
    "  --repairs N           with --schema: send a bad reply back to the model N times (0..10,\n"
    "                        default 1)\n"
    "\n"
    "embed takes --model, --provider, --base-url, --api-key-env, --budget, --on-budget and\n"
    "  --dimensions N        shorter vectors, for models that can shorten theirs\n"
    "\n"
    "Keys come from OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY (or GOOGLE_API_KEY);\n"
    "OLLAMA_HOST points at Ollama. decode prints the canonical events of a recorded response.\n";

// `--store PATH` and one optional positional argument, for sessions and show.
struct StoreArgs {
    std::string store;
    std::vector<std::string> positional;
    bool ok = true;
};

StoreArgs store_args(const std::vector<std::string>& args, const char* command) {
    StoreArgs out;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--store" && i + 1 < args.size()) {
            out.store = args[++i];
        } else if (!args[i].empty() && args[i][0] == '-') {
            std::fprintf(stderr, "ullm %s: unknown option %s\n", command, args[i].c_str());
            out.ok = false;
        } else {
            out.positional.push_back(args[i]);
        }
    }
    if (out.store.empty()) out.store = ullm_cli::default_store_path();
    return out;
}

int decode_command(const std::vector<std::string>& args) {
    std::string provider;
    std::string path;
    int status = 200;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto& arg = args[i];
        if ((arg == "--provider" || arg == "--status") && i + 1 < args.size()) {
            const auto& value = args[++i];
            if (arg == "--provider") {
                provider = value;
                continue;
            }
            char* end = nullptr;
            const long number = std::strtol(value.c_str(), &end, 10);
            if (value.empty() || *end != '\0' || number < 100 || number > 599) {
                std::fprintf(stderr, "ullm decode: --status needs an HTTP status, got \"%s\"\n",
                             value.c_str());
                return exit_usage;
            }
            status = static_cast<int>(number);
        } else if (!arg.empty() && arg[0] == '-') {
            std::fprintf(stderr, "ullm decode: unknown option \"%s\"\n", arg.c_str());
            return exit_usage;
        } else if (path.empty()) {
            path = arg;
        } else {
            std::fprintf(stderr, "ullm decode: one FILE only\n");
            return exit_usage;
        }
    }
    if (provider.empty() || path.empty()) {
        std::fputs(usage_text, stderr);
        return exit_usage;
    }
    return ullm_cli::decode(provider, status, path);
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        std::fputs(usage_text, args.empty() ? stderr : stdout);
        return args.empty() ? exit_usage : 0;
    }
    const std::string& command = args[0];
    if (command == "version" || command == "--version") {
        const ullm::BuildInfo info = ullm::build_info();
        fmt::print(
            "ullm {}\n  libcurl {} (running {})\n  nlohmann_json {}\n  SQLite {} (running {})\n",
            info.ullm, info.libcurl, info.libcurl_runtime, info.nlohmann_json, info.sqlite,
            info.sqlite_runtime);
        return 0;
    }
    if (command == "chat") return ullm_cli::chat({args.begin() + 1, args.end()});
    if (command == "send") return ullm_cli::send({args.begin() + 1, args.end()});
    if (command == "embed") return ullm_cli::embed({args.begin() + 1, args.end()});
    if (command == "decode") return decode_command(args);
    if (command == "doctor") return ullm_cli::doctor({args.begin() + 1, args.end()});
    if (command == "usage") return ullm_cli::usage({args.begin() + 1, args.end()});
    if (command == "sessions" || command == "show") {
        const auto parsed = store_args(args, command.c_str());
        if (!parsed.ok) return exit_usage;
        if (command == "sessions") {
            if (!parsed.positional.empty()) {
                std::fprintf(stderr, "ullm sessions: unexpected argument %s\n",
                             parsed.positional[0].c_str());
                return exit_usage;
            }
            return ullm_cli::list_sessions(parsed.store);
        }
        if (parsed.positional.size() != 1) {
            std::fprintf(stderr, "ullm show: needs one session ID\n");
            return exit_usage;
        }
        return ullm_cli::show_session(parsed.store, parsed.positional[0]);
    }
    std::fprintf(stderr, "ullm: unknown command \"%s\" (try ullm help)\n", command.c_str());
    return exit_usage;
}
