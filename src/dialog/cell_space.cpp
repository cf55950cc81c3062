#include <ullm/dialog/cell_space.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/tools/validator.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ullm {

namespace {

struct Cell {
    CellKind kind = CellKind::data;
    json value;
    std::optional<json> schema;
    std::shared_ptr<const CellHandler> handler;
    std::shared_ptr<const CellPattern> pattern;
};

// `text` as a JSON string, bounded and safe to show whatever bytes it holds.
std::string quote(std::string_view text, std::size_t limit = 120) {
    std::string out = json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
    if (out.size() > limit) out = out.substr(0, limit) + "...";
    return out;
}

[[noreturn]] void fail(const char* code, const std::string& message) {
    throw DialogError(code, message);
}

std::string show(const CellLink& link) {
    return quote(link.to_string());
}

// The unescaped reference tokens of `link.pointer`.
std::vector<std::string> split_pointer(const CellLink& link) {
    const std::string& pointer = link.pointer;
    std::vector<std::string> tokens;
    if (pointer.empty()) return tokens;
    if (pointer.front() != '/') {
        fail("invalid_link", "The path of " + show(link) + " must be empty or start with '/'.");
    }
    std::string token;
    for (std::size_t i = 1; i <= pointer.size(); ++i) {
        if (i == pointer.size() || pointer[i] == '/') {
            tokens.push_back(std::move(token));
            token.clear();
            continue;
        }
        if (pointer[i] != '~') {
            token.push_back(pointer[i]);
            continue;
        }
        if (i + 1 < pointer.size() && pointer[i + 1] == '0') {
            token.push_back('~');
        } else if (i + 1 < pointer.size() && pointer[i + 1] == '1') {
            token.push_back('/');
        } else {
            fail("invalid_link", "The path of " + show(link) +
                                     " has a '~' that is not an escape: write ~0 for '~' and ~1 "
                                     "for '/'.");
        }
        ++i;
    }
    return tokens;
}

std::string join_pointer(const std::vector<std::string>& tokens, std::size_t from = 0) {
    std::string out;
    for (std::size_t i = from; i < tokens.size(); ++i) out = detail::pointer_append(out, tokens[i]);
    return out;
}

// An RFC 6901 array index: "0" or digits without a leading zero. npos when it is not one.
std::size_t parse_index(std::string_view token) {
    if (token.empty() || token.size() > 15) return std::string_view::npos;
    if (token.size() > 1 && token.front() == '0') return std::string_view::npos;
    std::size_t index = 0;
    for (const char c : token) {
        if (c < '0' || c > '9') return std::string_view::npos;
        index = index * 10 + static_cast<std::size_t>(c - '0');
    }
    return index;
}

const char* type_name(const json& value) {
    switch (value.type()) {
        case json::value_t::object:
            return "an object";
        case json::value_t::array:
            return "an array";
        case json::value_t::string:
            return "a string";
        case json::value_t::boolean:
            return "a boolean";
        case json::value_t::null:
            return "null";
        default:
            return "a number";
    }
}

// The child of `node` at `token`, or an `invalid_link` naming what is there instead.
const json& step(const json& node, const std::string& token, const CellLink& at,
                 const CellLink& requested) {
    const std::string where = at.pointer.empty() ? std::string("the root") : quote(at.pointer);
    if (node.is_object()) {
        const auto found = node.find(token);
        if (found != node.end()) return *found;
        fail("invalid_link", show(requested) + " does not resolve: there is no key " +
                                 quote(token) + " at " + where + " of " + show({at.cell_id, {}}) +
                                 ".");
    }
    if (node.is_array()) {
        const std::size_t index = parse_index(token);
        if (index != std::string_view::npos && index < node.size()) return node[index];
        fail("invalid_link", show(requested) + " does not resolve: " + where + " of " +
                                 show({at.cell_id, {}}) + " is an array of " +
                                 std::to_string(node.size()) + " elements and " + quote(token) +
                                 " is not one of its indexes.");
    }
    fail("invalid_link", show(requested) + " does not resolve: " + where + " of " +
                             show({at.cell_id, {}}) + " is " + type_name(node) +
                             ", which has no members.");
}

// The link stored in `node` (an `is_link_object`), re-thrown with where it was found.
CellLink stored_link(const json& node, const CellLink& at) {
    try {
        return parse_link(node);
    } catch (const DialogError& error) {
        fail("invalid_link",
             "The link stored at " + show(at) + " is malformed: " + error.message());
    }
}

// Runs of a pattern on this thread, innermost last: a write to a space listed here is refused.
thread_local std::vector<const void*> running_patterns;

class PatternScope {
public:
    explicit PatternScope(const void* space) { running_patterns.push_back(space); }
    ~PatternScope() { running_patterns.pop_back(); }
    PatternScope(const PatternScope&) = delete;
    PatternScope& operator=(const PatternScope&) = delete;
};

bool inside_link(const CellLink& outer, const CellLink& link) {
    if (outer.cell_id != link.cell_id) return false;
    if (outer.pointer.empty() || link.pointer == outer.pointer) return true;
    return link.pointer.size() > outer.pointer.size() &&
           link.pointer.compare(0, outer.pointer.size(), outer.pointer) == 0 &&
           link.pointer[outer.pointer.size()] == '/';
}

constexpr std::size_t max_narrow_depth = 32;

// The schema of the member `token` of values that `node` describes; nullopt when `node`
// says nothing about it.
std::optional<json> narrow(const json& root, const json& node, const std::string& token,
                           std::size_t depth) {
    if (!node.is_object() || depth > max_narrow_depth) return std::nullopt;
    std::vector<json> parts;
    const auto properties = node.find("properties");
    const bool named =
        properties != node.end() && properties->is_object() && properties->contains(token);
    if (named) {
        parts.push_back((*properties)[token]);
    } else if (const auto extra = node.find("additionalProperties");
               extra != node.end() && extra->is_object()) {
        parts.push_back(*extra);
    }
    if (const auto items = node.find("items");
        items != node.end() && items->is_object() &&
        (parse_index(token) != std::string_view::npos || token == "-")) {
        parts.push_back(*items);
    }
    if (const auto ref = node.find("$ref"); ref != node.end() && ref->is_string()) {
        const std::string& text = ref->get_ref<const std::string&>();
        const json* target = nullptr;
        if (text == "#") {
            target = &root;
        } else {
            for (const char* container : {"$defs", "definitions"}) {
                const std::string prefix = std::string("#/") + container + "/";
                const auto defs = root.find(container);
                if (text.rfind(prefix, 0) != 0 || defs == root.end() || !defs->is_object()) {
                    continue;
                }
                std::string name;
                const std::string escaped = text.substr(prefix.size());
                for (std::size_t i = 0; i < escaped.size(); ++i) {
                    if (escaped[i] == '~' && i + 1 < escaped.size()) {
                        name.push_back(escaped[i + 1] == '1' ? '/' : '~');
                        ++i;
                    } else {
                        name.push_back(escaped[i]);
                    }
                }
                if (const auto found = defs->find(name); found != defs->end()) target = &*found;
            }
        }
        if (target != nullptr) {
            if (auto part = narrow(root, *target, token, depth + 1)) parts.push_back(*part);
        }
    }
    if (const auto all = node.find("allOf"); all != node.end() && all->is_array()) {
        for (const auto& member : *all) {
            if (auto part = narrow(root, member, token, depth + 1)) parts.push_back(*part);
        }
    }
    for (const char* keyword : {"anyOf", "oneOf"}) {
        const auto list = node.find(keyword);
        if (list == node.end() || !list->is_array()) continue;
        json branches = json::array();
        bool open = false;  // a branch that says nothing leaves the member unconstrained
        for (const auto& member : *list) {
            auto part = narrow(root, member, token, depth + 1);
            if (!part) {
                open = true;
                break;
            }
            branches.push_back(std::move(*part));
        }
        if (!open && !branches.empty()) parts.push_back(json{{"anyOf", std::move(branches)}});
    }
    if (parts.empty()) return std::nullopt;
    if (parts.size() == 1) return std::move(parts.front());
    return json{{"allOf", std::move(parts)}};
}

// Whether `schema` holds a `$ref` anywhere (schemas are at most `max_schema_depth` deep).
bool has_ref(const json& schema, std::size_t depth) {
    if (!schema.is_structured() || depth > max_schema_depth) return false;
    if (schema.is_object() && schema.contains("$ref")) return true;
    return std::any_of(schema.begin(), schema.end(),
                       [&](const json& member) { return has_ref(member, depth + 1); });
}

json render(const json& value, std::size_t depth) {
    if (!value.is_structured()) return value;
    if (depth > max_render_depth) return "\u2026";
    if (value.is_array()) {
        json out = json::array();
        for (const auto& element : value) out.push_back(render(element, depth + 1));
        return out;
    }
    json out = json::object();
    for (auto it = value.begin(); it != value.end(); ++it) {
        if (!it.key().empty() && it.key().front() == '$') continue;
        out[it.key()] = render(it.value(), depth + 1);
    }
    return out;
}

// Throws `invalid_cell_value` unless `value` satisfies `schema`.
void check_value(const json& schema, const json& value, const std::string& cell_id) {
    try {
        validate_value(schema, value);
    } catch (const ToolArgumentError& error) {
        fail("invalid_cell_value",
             "The value at " + show({cell_id, error.path()}) + " " + error.reason() + ".");
    }
}

// Throws `invalid_cell_schema` unless `schema` is a supported schema (object root when
// `object_root`).
void check_schema(const json& schema, bool object_root) {
    try {
        if (object_root) {
            validate_schema(schema);
        } else {
            validate_value_schema(schema);
        }
    } catch (const ToolDefinitionError& error) {
        fail("invalid_cell_schema", error.message());
    }
}

void check_safe(const json& value, const char* code, const std::string& what) {
    const auto violation = detail::check_json_rules(value, "");
    if (!violation.constraint.empty()) {
        fail(code, what + " is not accepted: at " + quote(violation.path) + " " +
                       violation.constraint + ".");
    }
}

}  // namespace

struct CellSpace::State {
    mutable std::mutex mutex;
    std::unordered_map<std::string, Cell> cells;
    std::unordered_set<std::string> result_cells;  ///< Made by `run_handler` for a result.
    std::mt19937_64 random{std::random_device{}()};

    // Throws `pattern_write_denied` when a pattern of this space runs on the calling thread.
    void refuse_pattern_writes() const {
        if (std::find(running_patterns.begin(), running_patterns.end(), this) !=
            running_patterns.end()) {
            fail("pattern_write_denied",
                 "A pattern cannot write the caller's cells: it sees them read-only and returns "
                 "its result instead. Use a handler to change caller state.");
        }
    }

    // Needs the lock.
    const Cell& cell(const CellLink& link) const {
        const auto found = cells.find(link.cell_id);
        if (found == cells.end()) {
            fail("unknown_cell", "There is no cell " + show({link.cell_id, {}}) +
                                     ": use a link shown under # Available Cells.");
        }
        return found->second;
    }

    // Needs the lock.
    const Cell& data_cell(const CellLink& link) const {
        const Cell& found = cell(link);
        if (found.kind != CellKind::data) {
            fail("not_a_data_cell", show({link.cell_id, {}}) + " is a " +
                                        (found.kind == CellKind::handler ? "handler" : "pattern") +
                                        " cell and holds no value to read or write.");
        }
        return found;
    }

    // The node `link` names, following links stored inside values on the way, and also the
    // one it lands on when `follow_last` (unless that one names a handler or pattern cell:
    // then the stored link is the value). `where` receives the cell and local pointer of the
    // node. Needs the lock.
    const json& locate(const CellLink& link, bool follow_last, CellLink& where) const {
        CellLink current = link;
        std::vector<std::string> visited;
        for (;;) {
            const Cell& holder = data_cell(current);
            const std::vector<std::string> tokens = split_pointer(current);
            const json* node = &holder.value;
            CellLink at{current.cell_id, {}};
            bool jumped = false;
            for (std::size_t i = 0; i <= tokens.size(); ++i) {
                const bool last = i == tokens.size();
                if (is_link_object(*node) && (!last || follow_last)) {
                    CellLink next = stored_link(*node, at);
                    if (last) {
                        const auto target = cells.find(next.cell_id);
                        if (target != cells.end() && target->second.kind != CellKind::data) break;
                    }
                    next.pointer += join_pointer(tokens, i);
                    visited.push_back(current.to_string());
                    const std::string key = next.to_string();
                    if (std::find(visited.begin(), visited.end(), key) != visited.end()) {
                        std::string chain;
                        for (const auto& step_link : visited) chain += step_link + " -> ";
                        fail("invalid_link", show(link) +
                                                 " does not resolve: the links stored "
                                                 "in the cells form a cycle: " +
                                                 chain + key + ".");
                    }
                    if (visited.size() > max_link_hops) {
                        fail("invalid_link", show(link) +
                                                 " does not resolve: it passes through "
                                                 "more than " +
                                                 std::to_string(max_link_hops) + " stored links.");
                    }
                    current = std::move(next);
                    jumped = true;
                    break;
                }
                if (last) break;
                node = &step(*node, tokens[i], at, link);
                at.pointer = detail::pointer_append(at.pointer, tokens[i]);
            }
            if (!jumped) {
                where = std::move(at);
                return *node;
            }
        }
    }

    // Needs the lock.
    std::string fresh_id() {
        static constexpr char hex[] = "0123456789abcdef";
        for (;;) {
            std::string id = "cell-";
            for (int i = 0; i < 24; ++i) id.push_back(hex[random() & 0xFU]);
            if (cells.count(id) == 0) return id;
        }
    }

    // Checks a caller-given id (empty means generate) and returns the id to use. Needs the lock.
    std::string claim_id(std::string id) {
        if (id.empty()) return fresh_id();
        if (id.size() < min_cell_id_length) {
            fail("invalid_cell_id", "cell id " + quote(id) + " is shorter than " +
                                        std::to_string(min_cell_id_length) +
                                        " characters; short ids read as names to a model");
        }
        const bool bad_byte = std::any_of(id.begin(), id.end(), [](char c) {
            const auto byte = static_cast<unsigned char>(c);
            return c == '/' || byte <= 0x20 || byte == 0x7F;
        });
        if (bad_byte || !detail::is_valid_utf8(id)) {
            fail("invalid_cell_id", "cell id " + quote(id) +
                                        " must be valid UTF-8 without '/', spaces or control "
                                        "characters");
        }
        if (cells.count(id) != 0) {
            fail("invalid_cell_id", "cell id " + quote(id) + " is already in use");
        }
        return id;
    }

    CellLink insert(Cell cell, std::string id) {
        const std::lock_guard lock(mutex);
        id = claim_id(std::move(id));
        cells.emplace(id, std::move(cell));
        return CellLink{std::move(id), {}};
    }

    json get(const CellLink& link) const {
        const std::lock_guard lock(mutex);
        CellLink where;
        return locate(link, true, where);
    }

    std::optional<json> schema(const CellLink& link) const {
        const std::lock_guard lock(mutex);
        CellLink where;
        (void)locate(link, true, where);
        const Cell& holder = data_cell(where);
        if (!holder.schema) return std::nullopt;
        const json& root = *holder.schema;
        std::optional<json> narrowed = root;
        for (const auto& token : split_pointer(where)) {
            narrowed = narrow(root, *narrowed, token, 0);
            if (!narrowed) return std::nullopt;
        }
        if (!where.pointer.empty() && narrowed->is_object() && has_ref(*narrowed, 0)) {
            for (const char* container : {"$defs", "definitions"}) {
                if (root.contains(container) && !narrowed->contains(container)) {
                    (*narrowed)[container] = root[container];
                }
            }
        }
        return narrowed;
    }

    CellKind kind(const CellLink& link) const {
        const std::lock_guard lock(mutex);
        return cell(link).kind;
    }

    // Writes `value` at `link`; when `writable` is given, the place written (after following
    // stored links) must lie inside one of its links.
    void set(const CellLink& link, json value, const std::vector<CellLink>* writable) {
        refuse_pattern_writes();
        const std::lock_guard lock(mutex);
        std::vector<std::string> tokens = split_pointer(link);
        CellLink target{link.cell_id, {}};
        std::string last;
        if (!tokens.empty()) {
            last = std::move(tokens.back());
            tokens.pop_back();
            const json& parent = locate({link.cell_id, join_pointer(tokens)}, true, target);
            if (is_link_object(parent)) {
                // `locate` stops on a link to a handler or pattern cell: nothing to write into.
                fail("not_a_data_cell", show(link) + " does not resolve to a value: " +
                                            show(target) + " links to a handler or pattern cell.");
            }
        }
        const CellLink place = link.pointer.empty() ? target : target.child(last);
        (void)data_cell(place);
        if (writable != nullptr &&
            std::none_of(writable->begin(), writable->end(),
                         [&](const CellLink& allowed) { return inside_link(allowed, place); })) {
            fail("handler_write_denied",
                 "This handler may not write " + show(place) +
                     ": it may write only the cells it was bound to and its result cell.");
        }
        const std::size_t place_depth = split_pointer(place).size();
        const auto violation = detail::check_json_rules(
            value, place.to_string(),
            {.max_depth =
                 detail::max_json_depth > place_depth ? detail::max_json_depth - place_depth : 0});
        if (!violation.constraint.empty()) {
            fail("invalid_cell_value", "The value for " + show(place) + " is not accepted: at " +
                                           quote(violation.path) + " " + violation.constraint +
                                           ".");
        }
        Cell& holder = cells.find(place.cell_id)->second;
        if (!holder.schema) {
            put(holder.value, target, last, std::move(value), link);
            return;
        }
        json updated = holder.value;
        put(updated, target, last, std::move(value), link);
        check_value(*holder.schema, updated, place.cell_id);
        holder.value = std::move(updated);
    }

    // Stores `value` as member `last` of the node at `parent.pointer` inside `root` (the whole
    // `root` when `link` has an empty pointer).
    static void put(json& root, const CellLink& parent, const std::string& last, json value,
                    const CellLink& link) {
        if (link.pointer.empty()) {
            root = std::move(value);
            return;
        }
        json& node = parent.pointer.empty() ? root : root.at(json::json_pointer(parent.pointer));
        if (node.is_object()) {
            node[last] = std::move(value);
            return;
        }
        if (node.is_array()) {
            const std::size_t index = last == "-" ? node.size() : parse_index(last);
            if (index < node.size()) {
                node[index] = std::move(value);
                return;
            }
            if (index == node.size()) {
                node.push_back(std::move(value));
                return;
            }
            fail("invalid_link", show(link) + " does not resolve: the array at " + show(parent) +
                                     " has " + std::to_string(node.size()) +
                                     " elements; write an index up to " +
                                     std::to_string(node.size()) + " or \"-\" to append.");
        }
        fail("invalid_link", show(link) + " does not resolve: " + show(parent) + " is " +
                                 type_name(node) + ", which has no members.");
    }
};

CellSpace::CellSpace() : state_(std::make_shared<State>()) {}

CellSpace::~CellSpace() = default;

CellLink CellSpace::create(json value, std::optional<json> schema, std::string id) {
    state_->refuse_pattern_writes();
    check_safe(value, "invalid_cell_value", "The cell value");
    if (schema) {
        check_schema(*schema, false);
        check_value(*schema, value, id.empty() ? "<new cell>" : id);
    }
    return state_->insert(Cell{CellKind::data, std::move(value), std::move(schema), {}, {}},
                          std::move(id));
}

CellLink CellSpace::add_handler(CellHandler handler, std::string id) {
    state_->refuse_pattern_writes();
    if (!handler.run) fail("invalid_cell_value", "a handler cell needs a `run` callable");
    check_schema(handler.input_schema, true);
    for (const auto& bound : handler.writes) (void)kind(bound);
    Cell cell{CellKind::handler,
              nullptr,
              std::nullopt,
              std::make_shared<const CellHandler>(std::move(handler)),
              {}};
    return state_->insert(std::move(cell), std::move(id));
}

CellLink CellSpace::add_pattern(CellPattern pattern, std::string id) {
    state_->refuse_pattern_writes();
    if (!pattern.run) fail("invalid_cell_value", "a pattern cell needs a `run` callable");
    check_schema(pattern.argument_schema, true);
    check_schema(pattern.result_schema, false);
    Cell cell{CellKind::pattern,
              nullptr,
              std::nullopt,
              {},
              std::make_shared<const CellPattern>(std::move(pattern))};
    return state_->insert(std::move(cell), std::move(id));
}

CellKind CellSpace::kind(const CellLink& link) const {
    return state_->kind(link);
}

json CellSpace::get(const CellLink& link) const {
    return state_->get(link);
}

std::optional<json> CellSpace::schema(const CellLink& link) const {
    return state_->schema(link);
}

void CellSpace::set(const CellLink& link, json value) {
    state_->set(link, std::move(value), nullptr);
}

std::shared_ptr<const CellHandler> CellSpace::handler(const CellLink& link) const {
    const std::lock_guard lock(state_->mutex);
    return state_->cell(link).handler;
}

std::shared_ptr<const CellPattern> CellSpace::pattern(const CellLink& link) const {
    const std::lock_guard lock(state_->mutex);
    return state_->cell(link).pattern;
}

PatternRun CellSpace::run_pattern(const CellLink& link, const json& argument,
                                  std::stop_token stop) {
    const auto found = pattern(link);
    if (!found) {
        fail("not_a_pattern_cell", show({link.cell_id, {}}) + " is not a pattern cell.");
    }
    validate_arguments(found->argument_schema, argument);
    // The instance's own cells are not caller state: created even inside another pattern.
    const CellLink argument_cell =
        state_->insert(Cell{CellKind::data, argument, found->argument_schema, {}, {}}, {});
    if (stop.stop_requested()) throw CancelledError();
    json value;
    {
        const PatternScope scope(state_.get());
        value = found->run(argument, reader(), stop);
    }
    const auto violation = detail::check_json_rules(value, "");
    if (!violation.constraint.empty()) {
        fail("invalid_pattern_result", "The pattern's result is not accepted: at " +
                                           quote(violation.path) + " " + violation.constraint +
                                           ".");
    }
    try {
        validate_value(found->result_schema, value);
    } catch (const ToolArgumentError& error) {
        fail("invalid_pattern_result",
             "The pattern's result " +
                 (error.path().empty() ? std::string("(root)") : quote(error.path())) + " " +
                 error.reason() + ".");
    }
    const CellLink result_cell =
        state_->insert(Cell{CellKind::data, value, found->result_schema, {}, {}}, {});
    return PatternRun{argument_cell, result_cell, std::move(value)};
}

HandlerRun CellSpace::run_handler(const CellLink& link, json input, CellWriteGuard guard) {
    const auto found = handler(link);
    if (!found) {
        fail("not_a_handler_cell", show({link.cell_id, {}}) + " is not a handler cell.");
    }
    const auto properties = found->input_schema.find("properties");
    const bool declares_result = properties != found->input_schema.end() &&
                                 properties->is_object() && properties->contains("result");
    if (input.is_object() && input.contains("result") && !declares_result) {
        json rest = input;
        rest.erase("result");
        validate_arguments(found->input_schema, rest);
    } else {
        validate_arguments(found->input_schema, input);
    }
    CellLink result;
    if (const auto given = input.find("result"); given != input.end()) {
        // A result link of the model's choosing may only point into the handler's own cells
        // or a result cell an earlier run made: naming any other cell as the result would
        // overwrite it.
        result = parse_link(*given);
        bool result_cell = false;
        {
            std::lock_guard lock(state_->mutex);
            result_cell = state_->result_cells.count(result.cell_id) > 0;
        }
        if (!result_cell &&
            std::none_of(found->writes.begin(), found->writes.end(),
                         [&](const CellLink& bound) { return inside_link(bound, result); })) {
            fail("handler_write_denied",
                 "The result link must be a result location of an earlier call or point into a "
                 "cell this handler may write; leave \"result\" out to get a fresh result "
                 "cell.");
        }
    } else {
        result = create(nullptr);
        std::lock_guard lock(state_->mutex);
        state_->result_cells.insert(result.cell_id);
        input["result"] = result.to_json();
    }
    std::vector<CellLink> writable = found->writes;
    writable.push_back(result);
    CellWriter writer(*this, std::move(writable), std::move(guard));
    found->run(input, writer);
    json value;
    try {
        value = get(result);
    } catch (const DialogError& error) {
        if (error.code() != "invalid_link") throw;
    }
    return HandlerRun{std::move(result), std::move(value)};
}

CellReader CellSpace::reader() const {
    return CellReader(state_);
}

json CellSpace::render_for_model(const json& value) {
    return render(value, 1);
}

json CellReader::get(const CellLink& link) const {
    return state_->get(link);
}

std::optional<json> CellReader::schema(const CellLink& link) const {
    return state_->schema(link);
}

CellKind CellReader::kind(const CellLink& link) const {
    return state_->kind(link);
}

CellWriter::CellWriter(CellSpace& space, std::vector<CellLink> writable, CellWriteGuard guard)
    : space_(&space), writable_(std::move(writable)), guard_(std::move(guard)) {}

json CellWriter::get(const CellLink& link) const {
    return space_->get(link);
}

void CellWriter::set(const CellLink& link, json value) {
    if (!guard_) {
        space_->state_->set(link, std::move(value), &writable_);
        return;
    }
    guard_([&] { space_->state_->set(link, std::move(value), &writable_); });
}

bool CellWriter::may_write(const CellLink& link) const {
    return std::any_of(writable_.begin(), writable_.end(),
                       [&](const CellLink& allowed) { return inside_link(allowed, link); });
}

}  // namespace ullm
