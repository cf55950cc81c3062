#include "line_editor.hpp"

#if ULLM_CLI_LIBEDIT
#include <histedit.h>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>
#endif

#include "history_file.hpp"

namespace ullm_cli {

#if ULLM_CLI_LIBEDIT

namespace {

constexpr int history_size = 1000;

// Writes all of `text` to `fd`; false on an error.
bool write_all(int fd, const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t wrote = ::write(fd, text.data() + done, text.size() - done);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) return false;
        done += static_cast<std::size_t>(wrote);
    }
    return true;
}

class EditlineEditor final : public LineEditor {
public:
    explicit EditlineEditor(std::string history_file)
        : file_(std::move(history_file)),
          history_(history_init()),
          editor_(el_init("ullm", stdin, stdout, stderr)) {
        HistEvent event;
        history(history_, &event, H_SETSIZE, history_size);
        history(history_, &event, H_SETUNIQUE, 1);
        load();
        el_set(editor_, EL_CLIENTDATA, this);
        el_set(editor_, EL_EDITOR, "emacs");
        el_set(editor_, EL_PROMPT, &EditlineEditor::prompt_of);
        el_set(editor_, EL_HIST, history, history_);
        // While a line is edited Ctrl-C reaches the editor as a key, not as SIGINT (which
        // the chat's interrupt thread turns into cancelling a reply).
        el_set(editor_, EL_SETTY, "-d", "-isig", nullptr);
        // Functions are added through the wide call: the narrow one copies their names and
        // never frees the copies.
        el_wset(editor_, EL_ADDFN, L"ullm-interrupt", L"drop the line", &EditlineEditor::interrupt);
        el_set(editor_, EL_BIND, "^C", "ullm-interrupt", nullptr);
        // A terminal in bracketed-paste mode wraps what is pasted in these two sequences.
        el_wset(editor_, EL_ADDFN, L"ullm-paste-start", L"a paste begins",
                &EditlineEditor::paste_start);
        el_wset(editor_, EL_ADDFN, L"ullm-paste-end", L"a paste ends", &EditlineEditor::paste_end);
        el_set(editor_, EL_BIND, "\\e[200~", "ullm-paste-start", nullptr);
        el_set(editor_, EL_BIND, "\\e[201~", "ullm-paste-end", nullptr);
        const char* term = std::getenv("TERM");
        bracketed_ = term != nullptr && *term != '\0' && std::strcmp(term, "dumb") != 0;
    }

    ~EditlineEditor() override {
        el_end(editor_);
        history_end(history_);
    }

    EditlineEditor(const EditlineEditor&) = delete;
    EditlineEditor& operator=(const EditlineEditor&) = delete;

    Read read(const char* prompt, std::string& line, bool& pasted) override {
        prompt_ = prompt;
        interrupted_ = false;
        line.clear();
        pasted = false;
        // The terminal goes into editing mode before the prompt shows, so that a key pressed
        // after the prompt (Ctrl-D, Ctrl-C) is never taken by the cooked mode.
        el_set(editor_, EL_PREP_TERM, 1);
        if (bracketed_) std::fputs("\033[?2004h", stdout);
        std::fflush(stdout);
        int count = 0;
        const char* got = el_gets(editor_, &count);
        if (bracketed_) std::fputs("\033[?2004l", stdout);
        if (interrupted_) {
            in_paste_ = false;
            std::fputs("^C\n", stdout);
            std::fflush(stdout);
            return Read::interrupted;
        }
        std::fflush(stdout);
        if (got == nullptr || count <= 0) return Read::end;
        line.assign(got, static_cast<std::size_t>(count));
        while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
        // libedit reads a byte at a time, so the rest of a paste is still waiting.
        int waiting = 0;
        pasted = in_paste_ || (ioctl(STDIN_FILENO, FIONREAD, &waiting) == 0 && waiting > 0);
        return Read::line;
    }

    void remember(const std::string& line) override {
        if (line.empty() || line == last_) return;
        last_ = line;
        HistEvent event;
        history(history_, &event, H_ENTER, line.c_str());
        if (file_.empty()) return;
        const int fd = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        const bool ok = fd >= 0 && write_all(fd, history_line(line));
        const int error = errno;
        if (fd >= 0) ::close(fd);
        if (!ok && !warned_) {
            warned_ = true;
            std::fprintf(stderr, "ullm chat: cannot write the history file %s: %s\n", file_.c_str(),
                         std::strerror(error));
        }
    }

private:
    static EditlineEditor& of(EditLine* editor) {
        void* self = nullptr;
        el_get(editor, EL_CLIENTDATA, &self);
        return *static_cast<EditlineEditor*>(self);
    }

    static char* prompt_of(EditLine* editor) { return of(editor).prompt_.data(); }

    static unsigned char interrupt(EditLine* editor, int /*key*/) {
        of(editor).interrupted_ = true;
        return CC_NEWLINE;
    }

    static unsigned char paste_start(EditLine* editor, int /*key*/) {
        of(editor).in_paste_ = true;
        return CC_NORM;
    }

    static unsigned char paste_end(EditLine* editor, int /*key*/) {
        of(editor).in_paste_ = false;
        return CC_NORM;
    }

    // The file's entries into the history, the newest `history_size`; a file grown to twice
    // that is rewritten with them. Lines that are not a JSON string are passed over.
    void load() {
        if (file_.empty()) return;
        std::ifstream in(file_, std::ios::binary);
        std::vector<std::string> entries;
        std::string text;
        while (std::getline(in, text)) {
            if (auto entry = history_entry(text)) entries.push_back(std::move(*entry));
        }
        const std::size_t keep = static_cast<std::size_t>(history_size);
        const std::size_t first = entries.size() > keep ? entries.size() - keep : 0;
        HistEvent event;
        for (std::size_t i = first; i < entries.size(); ++i) {
            history(history_, &event, H_ENTER, entries[i].c_str());
        }
        if (!entries.empty()) last_ = entries.back();
        if (entries.size() > 2 * keep) {
            const std::string temporary = file_ + ".new";
            const int fd =
                ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd < 0) return;
            std::string kept;
            for (std::size_t i = first; i < entries.size(); ++i) kept += history_line(entries[i]);
            const bool ok = write_all(fd, kept) && ::fsync(fd) == 0;
            ::close(fd);
            if (!ok || std::rename(temporary.c_str(), file_.c_str()) != 0) {
                std::remove(temporary.c_str());
            }
        }
    }

    std::string file_;
    History* history_;
    EditLine* editor_;
    std::string prompt_;
    std::string last_;  ///< The newest entry, not entered twice in a row.
    bool interrupted_ = false;
    bool in_paste_ = false;
    bool bracketed_ = false;
    bool warned_ = false;
};

}  // namespace

std::unique_ptr<LineEditor> LineEditor::open(const std::string& history_file) {
    if (isatty(STDIN_FILENO) == 0 || isatty(STDOUT_FILENO) == 0) return nullptr;
    // libedit decodes keys and prints the line in the user's character set.
    std::setlocale(LC_CTYPE, "");
    return std::make_unique<EditlineEditor>(history_file);
}

bool LineEditor::available() {
    return true;
}

#else

std::unique_ptr<LineEditor> LineEditor::open(const std::string& /*history_file*/) {
    return nullptr;
}

bool LineEditor::available() {
    return false;
}

#endif

}  // namespace ullm_cli
