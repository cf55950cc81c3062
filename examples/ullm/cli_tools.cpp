#include "cli_tools.hpp"

#include <ullm/core/error.hpp>
#include <ullm/tools/schema.hpp>

#include <limits.h>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace ullm_cli {

namespace {

using ullm::json;
namespace schema = ullm::schema;
namespace fs = std::filesystem;

// A recursive-descent parser over the expression text.
class Calculator {
public:
    explicit Calculator(const std::string& text) : text_(text) {}

    double run() {
        const double value = sum();
        skip_spaces();
        if (at_ < text_.size()) fail(std::string("unexpected \"") + text_[at_] + "\"");
        if (!std::isfinite(value)) fail_whole("the result is not a finite number");
        return value;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw ullm::ToolResultError("Cannot calculate \"" + text_ + "\": " + what +
                                    " at position " + std::to_string(at_ + 1) + ".");
    }
    [[noreturn]] void fail_whole(const std::string& what) const {
        throw ullm::ToolResultError("Cannot calculate \"" + text_ + "\": " + what + ".");
    }

    void skip_spaces() {
        while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
    }

    bool take(char c) {
        skip_spaces();
        if (at_ < text_.size() && text_[at_] == c) {
            ++at_;
            return true;
        }
        return false;
    }

    double sum() {
        double value = product();
        for (;;) {
            if (take('+')) {
                value += product();
            } else if (take('-')) {
                value -= product();
            } else {
                return value;
            }
        }
    }

    double product() {
        double value = power();
        for (;;) {
            if (take('*')) {
                value *= power();
            } else if (take('/')) {
                const double divisor = power();
                if (divisor == 0) fail_whole("division by zero");
                value /= divisor;
            } else if (take('%')) {
                const double divisor = power();
                if (divisor == 0) fail_whole("division by zero");
                value = std::fmod(value, divisor);
            } else {
                return value;
            }
        }
    }

    double power() {
        const double base = unary();
        if (take('^')) return std::pow(base, power());  // Right-associative.
        return base;
    }

    double unary() {
        if (++depth_ > 100) fail("too deeply nested");
        double value = 0;
        if (take('-')) {
            value = -unary();
        } else if (take('+')) {
            value = unary();
        } else {
            value = primary();
        }
        --depth_;
        return value;
    }

    double primary() {
        skip_spaces();
        if (take('(')) {
            const double value = sum();
            if (!take(')')) fail("a missing \")\"");
            return value;
        }
        if (at_ < text_.size() &&
            (std::isdigit(static_cast<unsigned char>(text_[at_])) || text_[at_] == '.')) {
            const char* begin = text_.c_str() + at_;
            char* end = nullptr;
            const double value = std::strtod(begin, &end);
            if (end == begin) fail("a malformed number");
            at_ += static_cast<std::size_t>(end - begin);
            return value;
        }
        std::string name;
        while (at_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[at_]))) {
            name += static_cast<char>(std::tolower(static_cast<unsigned char>(text_[at_++])));
        }
        if (name.empty()) {
            if (at_ >= text_.size()) fail("the expression ends early");
            fail(std::string("unexpected \"") + text_[at_] + "\"");
        }
        if (name == "pi") return 3.14159265358979323846;
        if (name == "e") return 2.71828182845904523536;
        if (!take('(')) fail("unknown name \"" + name + "\"");
        const double x = sum();
        if (!take(')')) fail("a missing \")\"");
        if (name == "sqrt") {
            if (x < 0) fail_whole("the square root of a negative number");
            return std::sqrt(x);
        }
        if (name == "abs") return std::fabs(x);
        if (name == "floor") return std::floor(x);
        if (name == "ceil") return std::ceil(x);
        if (name == "round") return std::round(x);
        if (name == "exp") return std::exp(x);
        if (name == "ln" || name == "log10") {
            if (x <= 0) fail_whole("the logarithm of a number that is not positive");
            return name == "ln" ? std::log(x) : std::log10(x);
        }
        if (name == "sin") return std::sin(x);
        if (name == "cos") return std::cos(x);
        if (name == "tan") return std::tan(x);
        fail("unknown function \"" + name + "\"");
    }

    const std::string& text_;
    std::size_t at_ = 0;
    int depth_ = 0;
};

std::string format_time(std::time_t seconds, bool utc) {
    std::tm parts{};
    if (utc) {
        gmtime_r(&seconds, &parts);
    } else {
        localtime_r(&seconds, &parts);
    }
    char text[64];
    std::strftime(text, sizeof text, utc ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%d %H:%M:%S %Z", &parts);
    return text;
}

ullm::Tool current_time_tool() {
    return ullm::define_tool(
        {.name = "current_time",
         .description = "The current date and time, in UTC and in the user's time zone",
         .parameters = schema::object(),
         .execute = [](const json&, ullm::ToolContext&) -> json {
             const std::time_t now = std::time(nullptr);
             return {{"utc", format_time(now, true)},
                     {"local", format_time(now, false)},
                     {"unix", static_cast<std::int64_t>(now)}};
         }});
}

ullm::Tool calculator_tool() {
    return ullm::define_tool(
        {.name = "calculate",
         .description = "Evaluate an arithmetic expression exactly as a calculator would: + - * "
                        "/ % ^, parentheses, pi, e, sqrt, abs, round, ln, log10, sin, cos, tan",
         .parameters = schema::object(
             {{"expression", schema::string("The expression, e.g. 12 * (3 + 4)")}}, {"expression"}),
         .execute = [](const json& input, ullm::ToolContext&) -> json {
             const auto expression = input["expression"].get<std::string>();
             if (expression.size() > 1000) {
                 throw ullm::ToolResultError("The expression is longer than 1000 characters.");
             }
             const double value = calculate(expression);
             // Whole results read as whole numbers: 84, not 84.0.
             if (std::fabs(value) < 9e15 && value == std::trunc(value)) {
                 return {{"expression", expression}, {"value", static_cast<std::int64_t>(value)}};
             }
             return {{"expression", expression}, {"value", value}};
         }});
}

// Reads text files whose real path (symlinks followed) lies under `root`.
ullm::Tool read_file_tool(const fs::path& root) {
    constexpr std::uintmax_t limit = 64 * 1024;
    return ullm::define_tool(
        {.name = "read_file",
         .description = "Read a text file under the directory the user allowed (" + root.string() +
                        "); paths are relative to it",
         .parameters = schema::object({{"path", schema::string("The file's path")}}, {"path"}),
         .execute = [root](const json& input, ullm::ToolContext&) -> json {
             const auto asked = input["path"].get<std::string>();
             const fs::path joined = fs::path(asked).is_absolute() ? fs::path(asked) : root / asked;
             std::error_code error;
             const fs::path real = fs::canonical(joined, error);
             if (error) throw ullm::ToolResultError("No such file: " + asked);
             const auto relative = real.lexically_relative(root);
             if (relative.empty() || *relative.begin() == "..") {
                 throw ullm::ToolResultError("Access denied: " + asked +
                                             " is outside the allowed directory.");
             }
             if (!fs::is_regular_file(real)) throw ullm::ToolResultError("Not a file: " + asked);
             std::ifstream file(real, std::ios::binary);
             std::string text;
             text.resize(limit);
             file.read(text.data(), static_cast<std::streamsize>(limit));
             text.resize(static_cast<std::size_t>(file.gcount()));
             const bool truncated = fs::file_size(real, error) > limit;
             try {
                 (void)json(text).dump();
             } catch (const json::type_error&) {
                 throw ullm::ToolResultError("Not a text file (invalid UTF-8): " + asked);
             }
             return {{"path", relative.string()}, {"text", text}, {"truncated", truncated}};
         }});
}

}  // namespace

double calculate(const std::string& expression) {
    return Calculator(expression).run();
}

std::vector<ullm::Tool> builtin_tools(const std::optional<std::string>& allow_dir) {
    std::vector<ullm::Tool> tools = {current_time_tool(), calculator_tool()};
    if (allow_dir) {
        std::error_code error;
        const fs::path root = fs::canonical(*allow_dir, error);
        if (error || !fs::is_directory(root)) {
            throw std::runtime_error("--allow-dir " + *allow_dir + " is not a directory");
        }
        tools.push_back(read_file_tool(root));
    }
    return tools;
}

}  // namespace ullm_cli
