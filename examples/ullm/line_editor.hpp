#pragma once

// The keyboard side of `ullm chat` on a terminal: line editing and history through libedit
// (when ullm is built with it, ULLM_WITH_LIBEDIT), lines that arrive together taken as one
// paste, and Ctrl-C at the prompt as an event that drops the line being typed.

#include <memory>
#include <string>

namespace ullm_cli {

class LineEditor {
public:
    enum class Read {
        line,         ///< A line was read (without its newline).
        interrupted,  ///< Ctrl-C: the line being typed is dropped.
        end,          ///< Ctrl-D on an empty line, or the input ended.
    };

    // An editor on stdin and stdout when both are terminals and ullm has libedit; null
    // otherwise (the chat then reads plain lines). The history is kept in `history_file`, one
    // line of JSON (a string) per entry, written with mode 0600; empty: in memory only.
    static std::unique_ptr<LineEditor> open(const std::string& history_file);

    // Whether this build of ullm edits lines with libedit.
    static bool available();

    virtual ~LineEditor() = default;

    // Reads one line after `prompt`. `pasted` is set when more of the input had already
    // arrived with the line (or a bracketed paste is under way): the line is part of a paste
    // and does not end the message.
    virtual Read read(const char* prompt, std::string& line, bool& pasted) = 0;

    // Adds `line` to the history (and to the history file). Empty lines and a repeat of the
    // last entry are left out.
    virtual void remember(const std::string& line) = 0;
};

}  // namespace ullm_cli
