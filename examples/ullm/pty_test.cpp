// Drives `ullm chat --offline` through a pseudo-terminal, as a user at a keyboard would:
// the reply streams in piece by piece, Ctrl-C mid-reply cancels the turn and the next prompt
// works, and `--session` resumes the stored session after the process exits. Last, a session
// whose stored snapshot is corrupt is refused in one line and left as it is. With libedit:
// an arrow-up recalls the previous line, Ctrl-C drops the line being typed, lines pasted
// together (or in a bracketed paste) are one message, the history survives a restart and
// `--no-history` writes none.
//
//   ullm_cli_pty_test PATH_TO_ULLM SCRATCH_DIR
//
// Prints each step; exits 0 when every check passed, 1 otherwise.

#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ullm/conversation/snapshot.hpp>
#include <ullm/store/sqlite_session_store.hpp>

#include <sys/stat.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int failures = 0;

std::string read_text(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(file), {}};
}

void check(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok) ++failures;
}

// One `ullm chat` process on the master side of a pty.
class Session {
public:
    Session(const std::string& program, const std::vector<std::string>& args) {
        pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
        if (pid_ == 0) {
            std::vector<char*> argv;
            argv.push_back(const_cast<char*>(program.c_str()));
            for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
            argv.push_back(nullptr);
            setenv("TERM", "dumb", 1);
            execv(program.c_str(), argv.data());
            _exit(127);
        }
    }

    ~Session() {
        if (pid_ > 0 && !exited_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        if (master_ >= 0) close(master_);
    }

    [[nodiscard]] bool started() const { return pid_ > 0; }

    void type(const std::string& text) const { (void)!write(master_, text.data(), text.size()); }

    // Reads until `needle` appears after `from` (default: what was already consumed), at most
    // `timeout`. Records when each read arrived.
    bool wait_for(const std::string& needle,
                  std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
        const auto give_up = Clock::now() + timeout;
        for (;;) {
            const auto found = output_.find(needle, consumed_);
            if (found != std::string::npos) {
                consumed_ = found + needle.size();
                return true;
            }
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
            if (left.count() <= 0) return false;
            pollfd fd{master_, POLLIN, 0};
            if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
            char buffer[4096];
            const ssize_t got = read(master_, buffer, sizeof buffer);
            if (got <= 0) return false;  // The process ended.
            output_.append(buffer, static_cast<std::size_t>(got));
            reads_.push_back({Clock::now(), output_.size()});
        }
    }

    // How many separate reads delivered the text between byte offsets `begin` and `end`, and
    // over how long.
    [[nodiscard]] std::pair<int, std::chrono::milliseconds> spread(std::size_t begin,
                                                                   std::size_t end) const {
        int count = 0;
        Clock::time_point first{};
        Clock::time_point last{};
        std::size_t previous = 0;
        for (const auto& [when, size] : reads_) {
            if (size > begin && previous < end) {
                if (count == 0) first = when;
                last = when;
                ++count;
            }
            previous = size;
        }
        return {count, std::chrono::duration_cast<std::chrono::milliseconds>(last - first)};
    }

    [[nodiscard]] const std::string& output() const { return output_; }
    [[nodiscard]] std::size_t consumed() const { return consumed_; }

    int wait_exit() {
        int status = 0;
        const auto give_up = Clock::now() + std::chrono::seconds(15);
        while (waitpid(pid_, &status, WNOHANG) == 0) {
            if (Clock::now() > give_up) return -1;
            char buffer[4096];
            pollfd fd{master_, POLLIN, 0};
            if (poll(&fd, 1, 50) > 0 && read(master_, buffer, sizeof buffer) > 0) {
            }
        }
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }

private:
    pid_t pid_ = -1;
    int master_ = -1;
    bool exited_ = false;
    std::string output_;
    std::size_t consumed_ = 0;
    std::vector<std::pair<Clock::time_point, std::size_t>> reads_;
};

}  // namespace

// Line editing and history (libedit): in `store`'s history file, `chat --no-history` writes
// nothing.
void check_line_editing(const std::string& program, const std::string& store) {
    const std::string history = store + ".history";
    std::remove(store.c_str());
    std::remove(history.c_str());
    const std::vector<std::string> args = {"chat", "--offline", "--store", store};
    {
        Session chat(program, args);
        check(chat.wait_for("you> "), "a chat with history prompts");
        chat.type("What is 2+3?\n");
        check(chat.wait_for("2+3 = 5.") && chat.wait_for("you> "), "it answers a sum");
        chat.type("\x1b[A");  // The up arrow, as a terminal sends it.
        chat.type("\n");
        check(chat.wait_for("What is 2+3?") && chat.wait_for("2+3 = 5.") && chat.wait_for("you> "),
              "an arrow-up recalls the previous line, and Enter sends it again");

        chat.type("What is\n2+3?\n");  // Two lines in one write: a paste.
        check(chat.wait_for("...> 2+3?") && chat.wait_for("2+3 = 5.") && chat.wait_for("you> "),
              "lines that arrive together are one message");
        check(chat.output().find("I am the offline model") == std::string::npos,
              "and their first line was not sent on its own");

        chat.type("\x1b[200~What is\n");  // A bracketed paste, arriving in two pieces.
        check(chat.wait_for("...> "), "a bracketed paste continues the message at its newline");
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        chat.type("3+4?\n\x1b[201~");
        check(chat.wait_for("...> "), "to its end");
        chat.type("\n");
        check(chat.wait_for("3+4 = 7.") && chat.wait_for("you> "),
              "and Enter sends the pasted lines as one message");
        check(chat.output().find("I am the offline model") == std::string::npos,
              "none of them on its own");

        chat.type("abc\x03");
        check(chat.wait_for("(Ctrl-D or /exit quits)"), "Ctrl-C while typing drops the line");
        chat.type("What is 6*7?\n");
        check(chat.wait_for("6*7 = 42.") && chat.wait_for("you> "),
              "and the next line is sent without it");
        chat.type("\x04");
        const int status = chat.wait_exit();
        check(status == 0, "Ctrl-D quits (status " + std::to_string(status) + ")");
        if (status != 0) std::printf("%s\n", chat.output().substr(chat.consumed()).c_str());
    }
    const std::string kept = read_text(history);
    struct stat status {};
    check(kept.find("\"What is 6*7?\"\n") != std::string::npos &&
              kept.find("abc") == std::string::npos,
          "the history file holds the lines sent, not the dropped one");
    check(stat(history.c_str(), &status) == 0 && (status.st_mode & 0777) == 0600,
          "and only its owner may read it");
    {
        Session again(program, args);
        again.wait_for("you> ");
        again.type("\x1b[A\n");
        check(again.wait_for("6*7 = 42.") && again.wait_for("you> "),
              "the history survives a restart of ullm chat");
        again.type("\x04");
        check(again.wait_exit() == 0, "and Ctrl-D quits");
    }
    {
        auto quiet = args;
        quiet.emplace_back("--no-history");
        Session chat(program, quiet);
        chat.wait_for("you> ");
        chat.type("What is 8-1?\n");
        check(chat.wait_for("8-1 = 7.") && chat.wait_for("you> "), "--no-history chats");
        chat.type("\x04");
        check(chat.wait_exit() == 0, "and quits");
    }
    check(read_text(history) == kept, "--no-history writes no history");
    {
        // A history that cannot be written is said once; the chat goes on.
        const std::string blocked = store + "-blocked";
        std::remove((blocked + ".history").c_str());
        mkdir((blocked + ".history").c_str(), 0700);
        Session chat(program, {"chat", "--offline", "--store", blocked});
        chat.wait_for("you> ");
        chat.type("What is 1+1?\n");
        check(chat.wait_for("ullm chat: cannot write the history file " + blocked +
                            ".history: Is a directory") &&
                  chat.wait_for("1+1 = 2.") && chat.wait_for("you> "),
              "a history file that cannot be written is said, and the chat goes on");
        chat.type("\x04");
        check(chat.wait_exit() == 0, "and quits");
        rmdir((blocked + ".history").c_str());
    }
}

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: ullm_cli_pty_test PATH_TO_ULLM SCRATCH_DIR\n");
        return 64;
    }
    const std::string program = argv[1];
    const std::string store = std::string(argv[2]) + "/pty-sessions.db";
    std::remove(store.c_str());
    std::remove((store + ".history").c_str());
    const std::vector<std::string> args = {"chat", "--offline", "--store",
                                           store,  "--session", "pty-session"};
    {
        Session chat(program, args);
        check(chat.started(), "ullm chat starts in a pty");
        check(chat.wait_for("session pty-session (new)") && chat.wait_for("you> "),
              "a new session greets and prompts");

        chat.type("tell me a story\n");
        check(chat.wait_for("ullm> Once"), "the story starts");
        const std::size_t story_start = chat.consumed();
        check(chat.wait_for("socket,"), "the story goes on");
        const auto [reads, over] = chat.spread(story_start, chat.consumed());
        std::printf("     the first %zu bytes of the story came in %d reads over %lld ms\n",
                    chat.consumed() - story_start, reads, static_cast<long long>(over.count()));
        check(reads >= 3 && over >= std::chrono::milliseconds(100),
              "the reply streams in pieces, not at once");

        chat.type("\x03");  // Ctrl-C, as the keyboard sends it.
        check(chat.wait_for("cancelled: nothing of this turn was stored"),
              "Ctrl-C cancels the running reply");
        check(chat.wait_for("you> "), "and the prompt comes back");
        check(chat.output().find("this tale.") == std::string::npos,
              "the story did not run to its end");

        chat.type("What is 2+3?\n");
        check(chat.wait_for("calculate(") && chat.wait_for("2+3 = 5."),
              "the next turn calls a tool and answers");
        check(chat.wait_for("you> "), "and prompts again");
        chat.type("\x03");
        check(chat.wait_for("(Ctrl-D or /exit quits)"), "Ctrl-C at the prompt does not quit");
        chat.type("/exit\n");
        check(chat.wait_exit() == 0, "/exit quits with status 0");
    }
    {
        Session again(program, args);
        check(again.wait_for(
                  "session pty-session (resumed, 4 messages; model kept from the session)"),
              "--session resumes with its model: the cancelled turn left nothing, the sum turn "
              "4 messages");
        again.wait_for("you> ");
        again.type("/history\n");
        check(again.wait_for("What is 2+3?") && again.wait_for("2+3 = 5."),
              "/history shows the earlier turn");
        again.wait_for("you> ");
        again.type("\x04");  // Ctrl-D.
        check(again.wait_exit() == 0, "Ctrl-D quits with status 0");
    }
    {
        // A snapshot no restore accepts, written behind ullm's back.
        const std::string corrupt = R"({"format":"not-a-snapshot"})";
        ullm::SqliteSessionStore::open(store)->put("", "broken", corrupt, 0);
        Session broken(program, {"chat", "--offline", "--store", store, "--session", "broken"});
        check(broken.wait_for("ullm chat: the stored session cannot be restored ("),
              "a corrupt session is refused in one line");
        check(broken.wait_exit() == 1, "with status 1");
        Session show(program, {"show", "broken", "--store", store});
        check(show.wait_for("ullm show: session \"broken\": at /") && show.wait_exit() == 1,
              "show refuses it too, with status 1");
        // A session the library wrote, with no model recorded by ullm.
        ullm::ConversationSnapshot plain{
            .session_id = "plain",
            .messages = {ullm::Message::user("hi"), ullm::Message::assistant("hello")}};
        ullm::SqliteSessionStore::open(store)->put("", "plain",
                                                   ullm::snapshot_to_json(plain).dump(), 0);
        Session shown(program, {"show", "plain", "--store", store});
        check(shown.wait_for("| Provider | (not recorded) |") &&
                  shown.wait_for("| Model | (not recorded) |") && shown.wait_exit() == 0,
              "show says a session without a recorded model has none");
        const auto kept = ullm::SqliteSessionStore::open(store)->get("", "broken");
        check(kept && kept->snapshot == corrupt && kept->version == 1,
              "and the stored session is left as it was");
    }
#if ULLM_CLI_LIBEDIT
    check_line_editing(program, std::string(argv[2]) + "/pty-history.db");
#else
    std::printf("     (no libedit: line editing and history not checked)\n");
#endif
    std::printf("%s\n", failures == 0 ? "all pty checks passed" : "some pty checks FAILED");
    return failures == 0 ? 0 : 1;
}
