#include "chat.hpp"

#include "cli_tools.hpp"
#include "history_file.hpp"
#include "line_editor.hpp"
#include "offline_model.hpp"
#include "output.hpp"
#include "sessions.hpp"
#include "terminal.hpp"
#include "usage.hpp"

#include <ullm/conversation/context_manager.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/mcp/mcp_client.hpp>
#include <ullm/mcp/mcp_tools.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/price_table.hpp>

#include <fmt/core.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>

namespace ullm_cli {

namespace {

using ullm::json;

constexpr int exit_failed = 1;
constexpr int exit_no_model = 2;

// Bad command-line input: one line, exit 64.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Settings {
    std::string model;
    std::string provider;
    std::string base_url;
    std::string api_key_env;
    std::string system;
    std::string session;
    std::string store;
    std::string ledger;  // --ledger: record usage there
    std::optional<std::string> allow_dir;
    std::optional<double> budget;
    ullm::BudgetAction on_budget = ullm::BudgetAction::throw_error;
    int max_tool_rounds = 5;
    std::optional<std::size_t> window;
    std::optional<std::int64_t> dimensions;  // embed
    std::optional<std::string> schema_file;  // send
    int repairs = 1;                         // send --schema
    bool tools = true;
    bool offline = false;
    bool json = false;
    bool history = true;  // chat: keep the typed lines beside the store
    std::vector<std::string> positional;
    std::vector<std::string> mcp;              // --mcp 'COMMAND ARGS', one per server
    std::vector<std::string> mcp_urls;         // --mcp-url URL, one per server
    std::vector<ullm::McpClient> mcp_servers;  // started by start_mcp_servers
};

long long parse_integer(const std::string& option, const std::string& value, long long low,
                        long long high) {
    char* end = nullptr;
    const long long number = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || number < low || number > high) {
        throw UsageError(option + " needs a whole number from " + std::to_string(low) + " to " +
                         std::to_string(high) + ", not \"" + value + "\"");
    }
    return number;
}

Settings parse(const std::vector<std::string>& args, bool for_send, bool for_embed = false) {
    Settings settings;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        const auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) throw UsageError(arg + " needs a value");
            return args[++i];
        };
        if (arg == "--model") {
            settings.model = value();
        } else if (arg == "--provider") {
            settings.provider = value();
        } else if (arg == "--base-url") {
            settings.base_url = value();
        } else if (arg == "--api-key-env") {
            settings.api_key_env = value();
        } else if (arg == "--system") {
            settings.system = value();
        } else if (arg == "--session") {
            settings.session = value();
        } else if (arg == "--store") {
            settings.store = value();
        } else if (arg == "--ledger") {
            settings.ledger = value();
        } else if (arg == "--allow-dir") {
            settings.allow_dir = value();
        } else if (arg == "--budget") {
            const std::string& text = value();
            char* end = nullptr;
            const double usd = std::strtod(text.c_str(), &end);
            if (text.empty() || *end != '\0' || !std::isfinite(usd) || usd < 0) {
                throw UsageError("--budget needs a number of USD that is not negative, not \"" +
                                 text + "\"");
            }
            settings.budget = usd;
        } else if (arg == "--on-budget") {
            const std::string& action = value();
            if (action == "throw") {
                settings.on_budget = ullm::BudgetAction::throw_error;
            } else if (action == "warn") {
                settings.on_budget = ullm::BudgetAction::warn;
            } else if (action == "skip") {
                settings.on_budget = ullm::BudgetAction::skip;
            } else {
                throw UsageError("--on-budget needs throw, warn or skip, not \"" + action + "\"");
            }
        } else if (arg == "--max-tool-rounds") {
            settings.max_tool_rounds = static_cast<int>(parse_integer(arg, value(), 0, 100));
        } else if (arg == "--window") {
            settings.window = static_cast<std::size_t>(parse_integer(arg, value(), 1, 1'000'000));
        } else if (arg == "--mcp" && !for_embed) {
            settings.mcp.push_back(value());
        } else if (arg == "--mcp-url" && !for_embed) {
            settings.mcp_urls.push_back(value());
        } else if (arg == "--no-tools") {
            settings.tools = false;
        } else if (arg == "--offline") {
            settings.offline = true;
        } else if (arg == "--no-history" && !for_send) {
            settings.history = false;
        } else if (arg == "--dimensions" && for_embed) {
            settings.dimensions = parse_integer(arg, value(), 1, 1'000'000);
        } else if (arg == "--schema" && for_send && !for_embed) {
            settings.schema_file = value();
        } else if (arg == "--repairs" && for_send && !for_embed) {
            settings.repairs = static_cast<int>(
                parse_integer(arg, value(), 0, ullm::max_structured_output_repairs));
        } else if (arg == "--json" && for_send) {
            settings.json = true;
        } else if (arg.size() > 1 && arg[0] == '-' && arg != "-") {
            throw UsageError("unknown option " + arg + " (try ullm help)");
        } else if (for_send) {
            settings.positional.push_back(arg);
        } else {
            throw UsageError("unexpected argument \"" + arg + "\" (try ullm help)");
        }
    }
    if (settings.store.empty()) settings.store = default_store_path();
    if (settings.allow_dir && !std::filesystem::is_directory(*settings.allow_dir)) {
        throw UsageError("--allow-dir " + *settings.allow_dir + " is not a directory");
    }
    return settings;
}

// Starts the servers of --mcp (each value a command and its arguments, split at spaces) and
// connects to those of --mcp-url (Streamable HTTP).
void start_mcp_servers(Settings& settings) {
    for (const auto& line : settings.mcp) {
        ullm::McpStdioOptions options;
        std::istringstream words(line);
        for (std::string word; words >> word;) options.command.push_back(word);
        if (options.command.empty()) throw UsageError("--mcp needs a command");
        settings.mcp_servers.push_back(ullm::McpClient::spawn(std::move(options)));
    }
    for (const auto& url : settings.mcp_urls) {
        settings.mcp_servers.push_back(ullm::McpClient::connect({.url = url}));
    }
}

// The built-in tools and those of the --mcp servers (renamed on a clash, see docs/mcp.md).
std::vector<ullm::Tool> session_tools(const Settings& settings) {
    if (!settings.tools) return {};
    auto tools = builtin_tools(settings.allow_dir);
    if (settings.mcp_servers.empty()) return tools;
    std::vector<std::string> taken;
    for (const auto& tool : tools) taken.push_back(tool.name());
    const auto served = ullm::mcp_tools(settings.mcp_servers, {.taken_names = taken});
    for (const auto& refused : served.rejected) {
        fmt::print(stderr, "  ! MCP tool {} of {} left out: {}\n", refused.name, refused.server,
                   refused.message);
    }
    tools.insert(tools.end(), served.tools.begin(), served.tools.end());
    return tools;
}

bool has_env(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0';
}

// Thrown when there is nothing to talk to: exit 2 with the hint.
struct NoModel : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Records usage in the `--ledger` file, when one was given.
std::function<void(const ullm::UsageReport&)> usage_recorder(const Settings& settings) {
    if (settings.ledger.empty()) return nullptr;
    return ledger_callback(settings.ledger, settings.session);
}

// The client and the model to use, from the settings and the environment.
std::pair<ullm::Client, std::string> make_client(const Settings& settings,
                                                 std::shared_ptr<ullm::SessionStore> store) {
    if (settings.offline) {
        // The offline model costs nothing, so budgets work with it too.
        auto prices =
            std::make_shared<const ullm::PriceTable>(ullm::PriceTable::builtin().with_overrides(
                json{{"models",
                      {{"offline/*",
                        {{"input", 0.0}, {"output", 0.0}, {"lastUpdated", "2026-11-30"}}}}}}));
        return {ullm::Client({.default_model = "offline/scripted",
                              .providers = {offline_model()},
                              .prices = std::move(prices),
                              .session_store = std::move(store),
                              .on_usage = usage_recorder(settings)}),
                settings.model.empty() ? "offline/scripted" : "offline/" + settings.model};
    }
    if (!settings.base_url.empty()) {
        if (settings.model.empty()) throw UsageError("--base-url needs --model");
        const std::string name = settings.provider.empty() ? "local" : settings.provider;
        ullm::OpenAiChatOptions options{.base_url = settings.base_url, .provider_name = name};
        if (!settings.api_key_env.empty()) {
            const char* key = std::getenv(settings.api_key_env.c_str());
            if (key == nullptr || *key == '\0') {
                throw UsageError("--api-key-env " + settings.api_key_env +
                                 ": the variable is empty");
            }
            options.api_key = key;
        }
        return {ullm::Client({.providers = {std::make_shared<ullm::OpenAiChatProvider>(options)},
                              .session_store = std::move(store),
                              .on_usage = usage_recorder(settings)}),
                name + "/" + settings.model};
    }
    const bool openai = has_env("OPENAI_API_KEY");
    const bool anthropic = has_env("ANTHROPIC_API_KEY");
    const bool gemini = has_env("GEMINI_API_KEY") || has_env("GOOGLE_API_KEY");
    const bool ollama = settings.provider == "ollama" || settings.model.rfind("ollama/", 0) == 0;
    if (!openai && !anthropic && !gemini && !ollama) {
        throw NoModel(
            "ullm: no API key (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY) and no "
            "--base-url: run with --offline to try a scripted model without network");
    }
    std::string model = settings.model;
    if (model.empty() && settings.provider == "openai") {
        model = "gpt-4o-mini";
    } else if (model.empty() && settings.provider == "anthropic") {
        model = "claude-haiku-4-5";
    } else if (model.empty() && settings.provider == "gemini") {
        model = "gemini-2.5-flash";
    } else if (model.empty()) {
        model = openai ? "gpt-4o-mini" : anthropic ? "claude-haiku-4-5" : "gemini-2.5-flash";
    }
    if (!settings.provider.empty() && model.find('/') == std::string::npos) {
        model = settings.provider + "/" + model;
    }
    return {ullm::Client::from_env(
                {.session_store = std::move(store), .on_usage = usage_recorder(settings)}),
            model};
}

// What `--session` without `--model` did with the model the session last talked to.
struct SessionModel {
    bool restored = false;        ///< `settings.model` is now the stored model.
    bool other_provider = false;  ///< Not restored: `--provider` names another provider.
    std::string stored;           ///< The stored `provider/model`, empty when there is none.
};

// With `--session` and no `--model` (nor `--base-url`), the model the session last talked to,
// when it fits the mode (an offline session resumes offline only) and `--provider` (given, it
// must be the stored model's provider: a model of another provider is never taken for it).
SessionModel restore_session_model(Settings& settings, ullm::SessionStore& store) {
    if (settings.session.empty() || !settings.model.empty() || !settings.base_url.empty()) {
        return {};
    }
    SessionModel result{.stored = session_model(store, settings.session)};
    const std::string& stored = result.stored;
    if (stored.empty()) return result;
    const bool offline = stored.rfind("offline/", 0) == 0;
    if (offline != settings.offline) return result;
    if (!settings.provider.empty() && stored.rfind(settings.provider + "/", 0) != 0) {
        result.other_provider = true;
        return result;
    }
    settings.model = offline ? stored.substr(std::string("offline/").size()) : stored;
    result.restored = true;
    return result;
}

// The line on stderr that says whether `--session` went on with its stored model.
void say_session_model(const char* command, const Settings& settings, const SessionModel& model) {
    if (model.restored) {
        std::fprintf(stderr, "ullm %s: session %s goes on with its model %s (--model changes it)\n",
                     command, settings.session.c_str(), model.stored.c_str());
    } else if (model.other_provider) {
        std::fprintf(stderr,
                     "ullm %s: session %s last used %s, not a model of --provider %s, so the "
                     "default model is used (--model picks one)\n",
                     command, settings.session.c_str(), model.stored.c_str(),
                     settings.provider.c_str());
    }
}

// The user message of a turn sent through `conversation`, recording its model.
ullm::Message user_turn(std::string text, const ullm::Conversation& conversation) {
    ullm::Message message = ullm::Message::user(std::move(text));
    message.metadata = turn_metadata(std::string(conversation.route().provider->name()) + "/" +
                                     conversation.route().model);
    return message;
}

// "chat-YYYYMMDD-HHMMSS-xxxx": sorts by start time; the random end keeps two chats started in
// the same second apart.
std::string new_session_id() {
    const std::time_t now = std::time(nullptr);
    std::tm parts{};
    localtime_r(&now, &parts);
    char text[32];
    std::strftime(text, sizeof text, "chat-%Y%m%d-%H%M%S-", &parts);
    std::random_device random;
    return text + fmt::format("{:04x}", random() & 0xFFFFU);
}

ullm::ConversationOptions conversation_options(const Settings& settings, const std::string& model,
                                               const std::string& session_id) {
    ullm::ConversationOptions options{.session_id = session_id,
                                      .system = settings.system,
                                      .model = model,
                                      .max_tool_rounds = settings.max_tool_rounds,
                                      .budget_usd = settings.budget,
                                      .budget_action = settings.on_budget,
                                      .on_budget_warning = [](const ullm::BudgetWarning& warning) {
                                          fmt::print("\n  ! budget: {}\n", warning.message);
                                      }};
    options.tools = session_tools(settings);
    if (settings.window) {
        options.context_manager = std::make_shared<ullm::SlidingWindowStrategy>(
            ullm::SlidingWindowOptions{.max_messages = *settings.window});
    }
    return options;
}

// One line of a value for the terminal, cut at `limit` bytes (never inside a UTF-8 sequence).
std::string compact(const json& value, std::size_t limit = 160) {
    std::string text = value.is_string()
                           ? value.get<std::string>()
                           : value.dump(-1, ' ', false, json::error_handler_t::replace);
    for (auto& c : text) {
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    }
    if (text.size() > limit) {
        std::size_t cut = limit;
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) --cut;
        text = text.substr(0, cut) + "…";
    }
    return text;
}

std::string usd(double value) {
    return fmt::format("${:.6f}", value);
}

const char* const chat_help =
    "  /history        the messages so far\n"
    "  /totals         tokens and cost of the session\n"
    "  /markdown       the transcript as Markdown\n"
    "  /clear          forget the history (the totals stay)\n"
    "  /model NAME     switch model, keeping the history\n"
    "  /tools          the tools the model may call\n"
    "  /help           this list\n"
    "  /exit           quit (so does Ctrl-D); Ctrl-C cancels a running reply\n";

class ChatSession {
public:
    ChatSession(Settings settings, ullm::Client client, std::string model, bool restored_model)
        : settings_(std::move(settings)),
          client_(std::move(client)),
          model_(std::move(model)),
          restored_model_(restored_model),
          session_id_(settings_.session.empty() ? new_session_id() : settings_.session),
          conversation_(client_, conversation_options(settings_, model_, session_id_)),
          interactive_(isatty(STDIN_FILENO) != 0),
          terminal_out_(isatty(STDOUT_FILENO) != 0),
          editor_(LineEditor::open(settings_.history ? history_path(settings_.store) : "")) {}

    int run() {
        const auto stored = conversation_.history().size();
        fmt::print(
            "ullm chat · {} · session {} ({}) · /help for commands\n",
            std::string(conversation_.route().provider->name()) + "/" + conversation_.route().model,
            session_id_,
            stored == 0 ? std::string("new")
                        : fmt::format("resumed, {} messages{}", stored,
                                      restored_model_ ? "; model kept from the session" : ""));
        Interrupts::on_interrupt([this] { interrupt(); });
        std::string line;
        for (;;) {
            if (!read_message(line)) {
                if (interactive_) fmt::print("\n");
                break;
            }
            const auto first = line.find_first_not_of(" \t\r\n");
            if (first == std::string::npos) continue;
            line = line.substr(first, line.find_last_not_of(" \t\r\n") - first + 1);
            if (line[0] == '/') {
                if (!command(line)) break;
                continue;
            }
            turn(line);
        }
        Interrupts::on_interrupt({});
        // A script that pipes its input in learns from the status whether every turn worked.
        return failed_turns_ > 0 && !interactive_ ? exit_failed : 0;
    }

private:
    // One message: a line, and the lines after it while each ends with a backslash (which is
    // dropped) or arrived in one paste with the next; the lines are joined with newlines.
    // False at the end of the input, unless a continued message was under way.
    bool read_message(std::string& message) {
        message.clear();
        std::string line;
        bool first = true;
        for (;;) {
            const char* prompt = first ? "you> " : "...> ";
            bool pasted = false;
            if (editor_) {
                const auto got = editor_->read(prompt, line, pasted);
                if (got == LineEditor::Read::end) return !first;
                if (got == LineEditor::Read::interrupted) {
                    fmt::print("(Ctrl-D or /exit quits)\n");
                    message.clear();
                    first = true;
                    continue;
                }
                editor_->remember(line);
            } else {
                if (interactive_) {
                    fmt::print("{}", prompt);
                    std::fflush(stdout);
                }
                if (!std::getline(std::cin, line)) return !first;
                if (!interactive_) fmt::print("{}{}\n", prompt, line);
            }
            if (!line.empty() && line.back() == '\r') line.pop_back();
            const bool continued = pasted || (!line.empty() && line.back() == '\\');
            if (continued && !pasted) line.pop_back();
            message += (first ? "" : "\n") + line;
            if (!continued) return true;
            first = false;
        }
    }

    // An MCP server said its tool list changed: offer the new list from this turn on.
    void refresh_mcp_tools() {
        const auto& servers = settings_.mcp_servers;
        if (!settings_.tools ||
            std::none_of(servers.begin(), servers.end(),
                         [](const auto& server) { return server.tools_changed(); })) {
            return;
        }
        try {
            conversation_.set_tools(session_tools(settings_));
            fmt::print("  (the MCP tools changed: {} tools now)\n", conversation_.tools().size());
        } catch (const ullm::Error& error) {
            fmt::print(stderr, "  ! the MCP tools changed but could not be listed: {}\n",
                       error.what());
        }
    }

    void interrupt() {
        std::lock_guard lock(mutex_);
        if (stream_ != nullptr) {
            stream_->cancel();
        } else {
            // With the line editor, SIGINT comes only between two reads; the next shows the
            // prompt.
            fmt::print("\n(Ctrl-D or /exit quits)\n{}", editor_ ? "" : "you> ");
            std::fflush(stdout);
        }
    }

    void turn(const std::string& text) {
        refresh_mcp_tools();
        auto stream = conversation_.send_stream(user_turn(text, conversation_));
        {
            std::lock_guard lock(mutex_);
            stream_ = &stream;
        }
        Spinner spinner(terminal_out_);
        bool text_started = false;
        try {
            while (auto event = stream.next()) {
                spinner.stop();
                using Type = ullm::StreamEvent::Type;
                switch (event->type) {
                    case Type::text_delta:
                        if (!text_started) fmt::print("ullm> ");
                        text_started = true;
                        fmt::print("{}", event->delta);
                        break;
                    case Type::tool_call_end:
                        if (text_started) fmt::print("\n");
                        text_started = false;
                        fmt::print("  ⚙ {}({})\n", event->tool_name,
                                   event->tool_call ? compact(event->tool_call->arguments) : "");
                        break;
                    case Type::tool_call_result:
                        if (event->tool_result) {
                            fmt::print("  {} {}\n", event->tool_result->is_error ? "✗" : "↳",
                                       compact(event->tool_result->result));
                        }
                        break;
                    case Type::retry:
                        fmt::print("  (retry {} in {} ms: {})\n", event->attempt,
                                   event->delay.count(), event->error_code);
                        break;
                    default:
                        break;
                }
                std::fflush(stdout);
            }
            spinner.stop();
            const auto& reply = stream.reply();
            const auto totals = conversation_.totals();
            if (reply && reply->budget_skipped) fmt::print("ullm> {}", reply->text);
            fmt::print("\n  · {} in, {} out · {} this turn · {} session\n",
                       reply ? reply->turn_usage.input_tokens : 0,
                       reply ? reply->turn_usage.output_tokens : 0,
                       usd(reply ? reply->turn_usage.cost_usd.value_or(0) : 0),
                       usd(totals.cost_usd));
        } catch (const ullm::CancelledError&) {
            spinner.stop();
            fmt::print("\n  ✗ cancelled: nothing of this turn was stored\n");
        } catch (const ullm::Error& error) {
            spinner.stop();
            ++failed_turns_;
            fmt::print("\n  ✗ {}: {}\n", error.code(), error.message());
        }
        std::fflush(stdout);
        std::lock_guard lock(mutex_);
        stream_ = nullptr;
    }

    // Runs a slash command; false to quit.
    bool command(const std::string& line) {
        const auto space = line.find(' ');
        const std::string name = line.substr(0, space);
        const std::string argument = space == std::string::npos
                                         ? std::string()
                                         : line.substr(line.find_first_not_of(' ', space));
        if (name == "/exit" || name == "/quit") return false;
        if (name == "/help") {
            fmt::print("{}", chat_help);
        } else if (name == "/history") {
            for (const auto& message : conversation_.history()) {
                std::string line_text = message.text();
                for (const auto& call : message.tool_calls()) {
                    line_text += (line_text.empty() ? "" : " ") + std::string("⚙ ") + call.name +
                                 "(" + compact(call.arguments, 80) + ")";
                }
                for (const auto& result : message.tool_results()) {
                    line_text += (line_text.empty() ? "" : " ") + std::string("↳ ") +
                                 compact(result.result, 80);
                }
                fmt::print("  {:<11} {}\n", std::string(ullm::to_string(message.role)) + ":",
                           compact(line_text, 200));
            }
        } else if (name == "/totals") {
            const auto totals = conversation_.totals();
            fmt::print("  {} requests · {} in ({} cached) · {} out · {}\n", totals.rounds,
                       totals.input_tokens, totals.cached_read_tokens, totals.output_tokens,
                       usd(totals.cost_usd));
        } else if (name == "/markdown") {
            fmt::print("{}\n", conversation_.to_markdown());
        } else if (name == "/clear") {
            conversation_.clear();
            fmt::print("  history cleared; totals kept\n");
        } else if (name == "/model") {
            if (argument.empty()) {
                fmt::print("  model: {}/{}\n", conversation_.route().provider->name(),
                           conversation_.route().model);
            } else {
                try {
                    const std::string model =
                        settings_.offline && argument.find('/') == std::string::npos
                            ? "offline/" + argument
                            : argument;
                    conversation_ = ullm::Conversation(
                        client_, conversation_options(settings_, model, session_id_));
                    model_ = model;
                    fmt::print("  model: {}/{}\n", conversation_.route().provider->name(),
                               conversation_.route().model);
                } catch (const ullm::Error& error) {
                    fmt::print("  ✗ {}: {}\n", error.code(), error.message());
                }
            }
        } else if (name == "/tools") {
            if (!settings_.tools) fmt::print("  no tools (--no-tools)\n");
            for (const auto& tool : session_tools(settings_)) {
                fmt::print("  {:<13} {}\n", tool.name(), tool.declaration().description);
            }
        } else {
            fmt::print("  unknown command {} (try /help)\n", name);
        }
        return true;
    }

    Settings settings_;
    ullm::Client client_;
    std::string model_;
    bool restored_model_;  ///< The model came from the stored session.
    std::string session_id_;
    ullm::Conversation conversation_;
    bool interactive_;
    bool terminal_out_;
    std::unique_ptr<LineEditor> editor_;  ///< Null unless stdin and stdout are terminals.
    int failed_turns_ = 0;
    std::mutex mutex_;
    ullm::ConversationStream* stream_ = nullptr;
};

// Runs `body`, turning each kind of failure into one line on stderr and an exit status.
template <typename Body>
int guarded(const char* command, Body body) {
    try {
        return body();
    } catch (const UsageError& error) {
        std::fprintf(stderr, "ullm %s: %s\n", command, error.what());
        return exit_usage;
    } catch (const NoModel& error) {
        std::fprintf(stderr, "%s\n", error.what());
        return exit_no_model;
    } catch (const ullm::InvalidConversationSnapshotError& error) {
        std::fprintf(stderr,
                     "ullm %s: the stored session cannot be restored (%s); it is left as it is\n",
                     command, error.message().c_str());
        return exit_failed;
    } catch (const ullm::Error& error) {
        std::fprintf(stderr, "ullm %s: %s\n", command, error.message().c_str());
        return exit_failed;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "ullm %s: %s\n", command, error.what());
        return exit_failed;
    }
}

// `send --schema FILE`: one structured-output call; prints the checked JSON value.
int send_object(const Settings& settings, const std::string& prompt) {
    if (!settings.session.empty() || settings.allow_dir || settings.window) {
        throw UsageError(
            "--schema takes no --session, --allow-dir or --window (one request, no tools)");
    }
    std::ifstream file(*settings.schema_file, std::ios::binary);
    if (!file) throw UsageError("cannot read the schema file " + *settings.schema_file);
    const std::string text{std::istreambuf_iterator<char>(file), {}};
    json schema = json::parse(text, nullptr, false);
    if (schema.is_discarded()) {
        throw UsageError("the schema file " + *settings.schema_file + " is not JSON");
    }
    auto [client, model] = make_client(settings, nullptr);
    ullm::ChatRequest request;
    request.model = model;
    request.system = settings.system;
    request.messages.push_back(ullm::Message::user(prompt));
    ullm::StructuredOutputOptions options{.max_repairs = settings.repairs};
    if (settings.budget)
        options.budget = ullm::CallBudget{.usd = *settings.budget, .action = settings.on_budget};
    const auto result = client.complete_object(std::move(request), std::move(schema), options);
    const json& value = result.get();  // throws for a refusal or a skipped request
    if (settings.json) {
        out_json line;
        line["object"] = out_json(value);
        line["repairs"] = result.repairs;
        line["model"] = result.response.model;
        line["usage"] = usage_json(result.usage);
        print_line(line);
    } else {
        print_line(out_json(value));
    }
    return 0;
}

}  // namespace

int chat(const std::vector<std::string>& args) {
    Interrupts::install();  // Before any thread starts.
    return guarded("chat", [&] {
        Settings settings = parse(args, false);
        start_mcp_servers(settings);
        auto store = open_store(settings.store);
        const SessionModel restored = restore_session_model(settings, *store);
        if (!restored.restored) say_session_model("chat", settings, restored);
        auto [client, model] = make_client(settings, store);
        ChatSession session(std::move(settings), std::move(client), std::move(model),
                            restored.restored);
        return session.run();
    });
}

int send(const std::vector<std::string>& args) {
    return guarded("send", [&] {
        Settings settings = parse(args, true);
        std::string prompt;
        for (const auto& word : settings.positional) {
            if (word == "-") continue;
            prompt += (prompt.empty() ? "" : " ") + word;
        }
        if (prompt.empty()) {
            prompt.assign(std::istreambuf_iterator<char>(std::cin), {});
            while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == '\r')) {
                prompt.pop_back();
            }
        }
        if (prompt.empty()) throw UsageError("no prompt (give it as arguments or on stdin)");
        if (settings.schema_file) return send_object(settings, prompt);
        start_mcp_servers(settings);
        std::shared_ptr<ullm::SqliteSessionStore> store;
        if (!settings.session.empty()) {
            store = open_store(settings.store);
            say_session_model("send", settings, restore_session_model(settings, *store));
        }
        auto [client, model] = make_client(settings, store);
        ullm::ConversationOptions options = conversation_options(settings, model, settings.session);
        auto conversation = client.conversation(std::move(options));
        if (settings.json) {
            print_line(response_json(conversation.send(user_turn(prompt, conversation))));
            return 0;
        }
        auto stream = conversation.send_stream(user_turn(prompt, conversation));
        for (const auto& event : stream) {
            if (const auto* delta = event.text_delta()) {
                std::fwrite(delta->data(), 1, delta->size(), stdout);
                std::fflush(stdout);
            }
        }
        std::fputc('\n', stdout);
        return 0;
    });
}

int embed(const std::vector<std::string>& args) {
    return guarded("embed", [&] {
        Settings settings = parse(args, true, true);
        if (!settings.session.empty() || !settings.system.empty() || settings.allow_dir ||
            settings.window || settings.json) {
            throw UsageError(
                "embed takes no --session, --system, --allow-dir, --window or --json (it always "
                "prints JSON)");
        }
        std::vector<std::string> inputs;
        for (const auto& word : settings.positional) {
            if (word != "-") inputs.push_back(word);
        }
        if (inputs.empty()) {
            std::string line;
            while (std::getline(std::cin, line)) {
                if (!line.empty() && line.back() == '\r') line.pop_back();
                if (!line.empty()) inputs.push_back(line);
            }
        }
        if (inputs.empty())
            throw UsageError("no input (give texts as arguments, or one a line on stdin)");
        if (settings.model.empty() && !settings.offline && settings.base_url.empty()) {
            if (has_env("OPENAI_API_KEY")) {
                settings.model = "text-embedding-3-small";
            } else if (has_env("GEMINI_API_KEY") || has_env("GOOGLE_API_KEY")) {
                settings.model = "gemini-embedding-001";
            } else {
                throw NoModel(
                    "ullm: no embedding model: set OPENAI_API_KEY or GEMINI_API_KEY, or name one "
                    "with --model (e.g. --model ollama/nomic-embed-text)");
            }
        }
        auto [client, model] = make_client(settings, nullptr);
        ullm::EmbeddingRequest request{
            .model = model, .inputs = std::move(inputs), .dimensions = settings.dimensions};
        const auto response =
            settings.budget ? client.embed(std::move(request), {},
                                           {.usd = *settings.budget, .action = settings.on_budget})
                            : client.embed(std::move(request));
        // Floats in their shortest form that reads back to the same value.
        std::string vectors = "[";
        for (std::size_t i = 0; i < response.vectors.size(); ++i) {
            vectors += i == 0 ? "[" : ",[";
            for (std::size_t k = 0; k < response.vectors[i].size(); ++k) {
                if (k > 0) vectors += ',';
                vectors += fmt::format("{}", response.vectors[i][k]);
            }
            vectors += "]";
        }
        vectors += "]";
        fmt::print(
            "{{\"model\":{},\"dimensions\":{},\"requests\":{},\"budget_skipped\":{},"
            "\"usage\":{},\"embeddings\":{}}}\n",
            json(response.model).dump(), response.dimensions(), response.requests,
            response.budget_skipped, usage_json(response.usage).dump(), vectors);
        return 0;
    });
}

}  // namespace ullm_cli
