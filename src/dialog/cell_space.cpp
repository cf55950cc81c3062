#include <ullm/dialog/cell_space.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/tools/validator.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "mentions.hpp"
#include "pointer.hpp"

namespace ullm {

namespace {

using detail::join_pointer;
using detail::message_quote_limit;
using detail::parse_index;
using detail::pointer_step;
using detail::quote;
using detail::show;
using detail::split_pointer;
using detail::type_name;

// Who a cell belongs to: the caller keeps its cells until it releases them; the cells a run
// makes go once nothing needs them.
enum class Origin : unsigned char { caller, handler_result, pattern_argument, pattern_result };

using SharedSchema = std::shared_ptr<const CompiledSchema>;

struct Cell {
    CellKind kind = CellKind::data;
    json value;
    /// Compiled once (patterns included); shared by the run cells of one pattern.
    SharedSchema schema;
    std::shared_ptr<const CellHandler> handler;
    SharedSchema input_schema;  ///< For a handler cell: its compiled `input_schema`.
    std::shared_ptr<const CellPattern> pattern;
    Origin origin = Origin::caller;
    /// For a pattern cell: the schemas its runs' cells get.
    SharedSchema argument_schema;
    SharedSchema result_schema;
    std::uint64_t mark = 0;  ///< The last collection that found it in use.
};

// Collections run when the space has grown by this many cells or doubled since the last one,
// whichever is more (and before it would pass `max_cells`).
constexpr std::size_t min_collection_growth = 1024;

[[noreturn]] void fail(ErrorCode code, const std::string& message) {
    throw DialogError(code, message);
}

// The link stored in `node` (an `is_link_object`), re-thrown with where it was found.
CellLink stored_link(const json& node, const CellLink& at) {
    try {
        return parse_link(node);
    } catch (const DialogError& error) {
        fail(ErrorCode::invalid_link,
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
void check_value(const CompiledSchema& schema, const json& value, const std::string& cell_id) {
    try {
        schema.validate_value(value);
    } catch (const ToolArgumentError& error) {
        fail(ErrorCode::invalid_cell_value,
             "The value at " + show({cell_id, error.path()}) + " " + error.reason() + ".");
    }
}

// `schema` compiled, once; throws `invalid_cell_schema` unless it is a supported schema
// (object root when `object_root`).
SharedSchema compile_schema(json schema, bool object_root) {
    try {
        return std::make_shared<const CompiledSchema>(
            object_root ? CompiledSchema::parameters(std::move(schema))
                        : CompiledSchema::value(std::move(schema)));
    } catch (const ToolDefinitionError& error) {
        fail(ErrorCode::invalid_cell_schema, error.message());
    }
}

void check_safe(const json& value, ErrorCode code, const std::string& what) {
    const auto violation = detail::check_json_rules(value, "");
    if (!violation.constraint.empty()) {
        fail(code, what + " is not accepted: at " + quote(violation.path, message_quote_limit) +
                       " " + violation.constraint + ".");
    }
}

}  // namespace

struct CellSpace::State {
    explicit State(CellSpaceOptions settings)
        : options(settings), collect_at(std::min(settings.max_cells, min_collection_growth)) {}

    const CellSpaceOptions options;
    mutable std::mutex mutex;
    std::unordered_map<std::string, Cell> cells;
    std::size_t run_cells = 0;  ///< How many of `cells` are run cells.
    /// What each live `CellHold` keeps, by hold id.
    std::map<std::uint64_t, std::unordered_set<std::string>> holds;
    std::atomic<std::uint64_t> next_hold{1};
    std::uint64_t epoch = 0;     ///< Collections so far.
    std::size_t collect_at = 0;  ///< The cell count at which the next collection runs.
    std::mt19937_64 random{std::random_device{}()};

    // Throws `pattern_write_denied` when a pattern of this space runs on the calling thread.
    void refuse_pattern_writes() const {
        if (std::find(running_patterns.begin(), running_patterns.end(), this) !=
            running_patterns.end()) {
            fail(ErrorCode::pattern_write_denied,
                 "A pattern cannot write the caller's cells: it sees them read-only and returns "
                 "its result instead. Use a handler to change caller state.");
        }
    }

    // Needs the lock.
    const Cell& cell(const CellLink& link) const {
        const auto found = cells.find(link.cell_id);
        if (found == cells.end()) {
            fail(ErrorCode::unknown_cell, "There is no cell " + show({link.cell_id, {}}) +
                                              ": use a link shown under # Available Cells.");
        }
        return found->second;
    }

    // Needs the lock.
    const Cell& data_cell(const CellLink& link) const {
        const Cell& found = cell(link);
        if (found.kind != CellKind::data) {
            fail(ErrorCode::not_a_data_cell,
                 show({link.cell_id, {}}) + " is a " +
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
                        fail(ErrorCode::invalid_link, show(link) +
                                                          " does not resolve: the links stored "
                                                          "in the cells form a cycle: " +
                                                          chain + key + ".");
                    }
                    if (visited.size() > max_link_hops) {
                        fail(ErrorCode::invalid_link, show(link) +
                                                          " does not resolve: it passes through "
                                                          "more than " +
                                                          std::to_string(max_link_hops) +
                                                          " stored links.");
                    }
                    current = std::move(next);
                    jumped = true;
                    break;
                }
                if (last) break;
                node = &pointer_step(*node, tokens[i], at, link);
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
            fail(ErrorCode::invalid_cell_id, "cell id " + quote(id, message_quote_limit) +
                                                 " is shorter than " +
                                                 std::to_string(min_cell_id_length) +
                                                 " characters; short ids read as names to a model");
        }
        const bool bad_byte = std::any_of(id.begin(), id.end(), [](char c) {
            const auto byte = static_cast<unsigned char>(c);
            return c == '/' || byte <= 0x20 || byte == 0x7F;
        });
        if (bad_byte || !detail::is_valid_utf8(id)) {
            fail(ErrorCode::invalid_cell_id,
                 "cell id " + quote(id, message_quote_limit) +
                     " must be valid UTF-8 without '/', spaces or control "
                     "characters");
        }
        if (cells.count(id) != 0) {
            fail(ErrorCode::invalid_cell_id,
                 "cell id " + quote(id, message_quote_limit) + " is already in use");
        }
        return id;
    }

    // Stores `cell` under `id` (generated when empty), kept by the hold `hold` when not 0.
    // Collects first when the space has grown enough or is full; throws `cell_space_full`
    // when it stays full.
    CellLink insert(Cell cell, std::string id, std::uint64_t hold = 0) {
        std::vector<Cell> released;  // destroyed after the lock is let go
        const std::lock_guard lock(mutex);
        if (cells.size() >= collect_at || cells.size() >= options.max_cells) {
            collect_locked(released);
        }
        if (cells.size() >= options.max_cells) {
            fail(ErrorCode::cell_space_full,
                 "The cell space is full: it holds its limit of " +
                     std::to_string(options.max_cells) +
                     " cells and every one is still in use. Release cells the caller no longer "
                     "needs, or make the space with a larger CellSpaceOptions::max_cells.");
        }
        id = claim_id(std::move(id));
        if (cell.origin != Origin::caller) ++run_cells;
        cells.emplace(id, std::move(cell));
        if (hold != 0) holds[hold].insert(id);
        return CellLink{std::move(id), {}};
    }

    // Marks every cell in use for collection `epoch`: caller cells (but `except`), the cells
    // of every hold, and whatever those link to or bind, transitively. Needs the lock.
    void mark_in_use(const std::string* except = nullptr) {
        ++epoch;
        std::vector<Cell*> pending;
        const auto visit = [&](std::string_view id) {
            const auto found = cells.find(std::string(id));
            if (found == cells.end() || found->second.mark == epoch) return;
            found->second.mark = epoch;
            pending.push_back(&found->second);
        };
        for (auto& [id, cell] : cells) {
            if (cell.origin != Origin::caller || (except != nullptr && id == *except)) continue;
            cell.mark = epoch;
            pending.push_back(&cell);
        }
        for (const auto& [hold, ids] : holds) {
            for (const auto& id : ids) visit(id);
        }
        const std::function<void(std::string_view)> follow = visit;
        while (!pending.empty()) {
            const Cell* cell = pending.back();
            pending.pop_back();
            if (cell->kind == CellKind::data) {
                detail::for_each_mention(cell->value, follow);
            } else if (cell->handler) {
                for (const auto& bound : cell->handler->writes) visit(bound.cell_id);
            }
        }
    }

    // Moves every run cell not in use into `released`. Needs the lock.
    std::size_t collect_locked(std::vector<Cell>& released) {
        const std::size_t before = released.size();
        if (run_cells > 0) {
            mark_in_use();
            for (auto it = cells.begin(); it != cells.end();) {
                if (it->second.origin == Origin::caller || it->second.mark == epoch) {
                    ++it;
                    continue;
                }
                released.push_back(std::move(it->second));
                it = cells.erase(it);
                --run_cells;
            }
        }
        const std::size_t live = cells.size();
        collect_at = std::min(options.max_cells, std::max(live * 2, live + min_collection_growth));
        return released.size() - before;
    }

    // Releases the cell `link` names, unless something needs it. Needs the lock.
    void release_locked(const CellLink& link, std::vector<Cell>& released) {
        const auto found = cells.find(link.cell_id);
        if (found == cells.end()) (void)cell(link);  // throws unknown_cell
        if (!link.pointer.empty()) {
            fail(ErrorCode::invalid_link, "Only a whole cell can be released: " + show(link) +
                                              " has a path; release " + show({link.cell_id, {}}) +
                                              ".");
        }
        for (const auto& [hold, ids] : holds) {
            if (ids.count(link.cell_id) != 0) {
                fail(ErrorCode::cell_in_use,
                     show({link.cell_id, {}}) +
                         " is still in use and was not released: it is held (by a run in "
                         "progress, a dialog instance's pins, pattern instances or transcript, a "
                         "dialog's tools or context cells, or another CellHold).");
            }
        }
        mark_in_use(&link.cell_id);
        if (found->second.mark == epoch) {
            fail(ErrorCode::cell_in_use,
                 show({link.cell_id, {}}) +
                     " is still in use and was not released: a cell that is "
                     "kept links to it (a stored link or an /of: text) or binds "
                     "it as a handler's cell.");
        }
        if (found->second.origin != Origin::caller) --run_cells;
        released.push_back(std::move(found->second));
        cells.erase(found);
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
        const json& root = holder.schema->schema();
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
                fail(ErrorCode::not_a_data_cell,
                     show(link) + " does not resolve to a value: " + show(target) +
                         " links to a handler or pattern cell.");
            }
        }
        const CellLink place = link.pointer.empty() ? target : target.child(last);
        (void)data_cell(place);
        if (writable != nullptr &&
            std::none_of(writable->begin(), writable->end(),
                         [&](const CellLink& allowed) { return inside_link(allowed, place); })) {
            fail(ErrorCode::handler_write_denied,
                 "This handler may not write " + show(place) +
                     ": it may write only the cells it was bound to and its result cell.");
        }
        const std::size_t place_depth = split_pointer(place).size();
        const auto violation = detail::check_json_rules(
            value, place.to_string(),
            {.max_depth =
                 detail::max_json_depth > place_depth ? detail::max_json_depth - place_depth : 0});
        if (!violation.constraint.empty()) {
            fail(ErrorCode::invalid_cell_value,
                 "The value for " + show(place) + " is not accepted: at " +
                     quote(violation.path, message_quote_limit) + " " + violation.constraint + ".");
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
            fail(ErrorCode::invalid_link, show(link) + " does not resolve: the array at " +
                                              show(parent) + " has " + std::to_string(node.size()) +
                                              " elements; write an index up to " +
                                              std::to_string(node.size()) + " or \"-\" to append.");
        }
        fail(ErrorCode::invalid_link, show(link) + " does not resolve: " + show(parent) + " is " +
                                          type_name(node) + ", which has no members.");
    }
};

struct CellHold::Entry {
    Entry(std::weak_ptr<CellSpace::State> owner, std::uint64_t hold_id)
        : state(std::move(owner)), id(hold_id) {}
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    ~Entry() {
        if (const auto owner = state.lock()) {
            const std::lock_guard lock(owner->mutex);
            owner->holds.erase(id);
        }
    }

    std::weak_ptr<CellSpace::State> state;
    std::uint64_t id;
};

namespace {

// Registers a new, empty hold on `state`; takes the lock. (A hold is made before any lock is
// taken and let go after, since letting go of one takes the lock.)
std::shared_ptr<CellHold::Entry> new_hold(const std::shared_ptr<CellSpace::State>& state) {
    auto entry = std::make_shared<CellHold::Entry>(state, state->next_hold.fetch_add(1));
    const std::lock_guard lock(state->mutex);
    state->holds[entry->id];
    return entry;
}

}  // namespace

CellSpace::CellSpace() : CellSpace(CellSpaceOptions{}) {}

CellSpace::CellSpace(CellSpaceOptions options) : state_(std::make_shared<State>(options)) {}

CellSpace::~CellSpace() = default;

CellLink CellSpace::create(json value, std::optional<json> schema, std::string id) {
    state_->refuse_pattern_writes();
    check_safe(value, ErrorCode::invalid_cell_value, "The cell value");
    SharedSchema compiled = schema ? compile_schema(std::move(*schema), false) : nullptr;
    if (compiled) check_value(*compiled, value, id.empty() ? "<new cell>" : id);
    Cell cell;
    cell.value = std::move(value);
    cell.schema = std::move(compiled);
    return state_->insert(std::move(cell), std::move(id));
}

CellLink CellSpace::add_handler(CellHandler handler, std::string id) {
    state_->refuse_pattern_writes();
    if (!handler.run) fail(ErrorCode::invalid_cell_value, "a handler cell needs a `run` callable");
    SharedSchema input_schema = compile_schema(handler.input_schema, true);
    for (const auto& bound : handler.writes) (void)kind(bound);
    Cell cell;
    cell.kind = CellKind::handler;
    cell.value = nullptr;
    cell.input_schema = std::move(input_schema);
    cell.handler = std::make_shared<const CellHandler>(std::move(handler));
    return state_->insert(std::move(cell), std::move(id));
}

CellLink CellSpace::add_pattern(CellPattern pattern, std::string id) {
    state_->refuse_pattern_writes();
    if (!pattern.run) fail(ErrorCode::invalid_cell_value, "a pattern cell needs a `run` callable");
    SharedSchema argument_schema = compile_schema(pattern.argument_schema, true);
    SharedSchema result_schema = compile_schema(pattern.result_schema, false);
    Cell cell;
    cell.kind = CellKind::pattern;
    cell.value = nullptr;
    cell.argument_schema = std::move(argument_schema);
    cell.result_schema = std::move(result_schema);
    cell.pattern = std::make_shared<const CellPattern>(std::move(pattern));
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
    std::shared_ptr<const CellPattern> found;
    SharedSchema argument_schema;
    SharedSchema result_schema;
    {
        const std::lock_guard lock(state_->mutex);
        const Cell& cell = state_->cell(link);
        found = cell.pattern;
        argument_schema = cell.argument_schema;
        result_schema = cell.result_schema;
    }
    if (!found) {
        fail(ErrorCode::not_a_pattern_cell, show({link.cell_id, {}}) + " is not a pattern cell.");
    }
    argument_schema->validate_arguments(argument);
    // The instance's own cells are not caller state: created even inside another pattern.
    // The run holds them from their creation on, so that no collection takes them first.
    PatternRun run;
    run.hold = CellHold(new_hold(state_));
    Cell argument_cell;
    argument_cell.value = argument;
    argument_cell.schema = std::move(argument_schema);
    argument_cell.origin = Origin::pattern_argument;
    run.argument = state_->insert(std::move(argument_cell), {}, run.hold.entry_->id);
    if (stop.stop_requested()) throw CancelledError();
    json value;
    {
        const PatternScope scope(state_.get());
        value = found->run(argument, reader(), stop);
    }
    const auto violation = detail::check_json_rules(value, "");
    if (!violation.constraint.empty()) {
        fail(ErrorCode::invalid_pattern_result, "The pattern's result is not accepted: at " +
                                                    quote(violation.path, message_quote_limit) +
                                                    " " + violation.constraint + ".");
    }
    try {
        result_schema->validate_value(value);
    } catch (const ToolArgumentError& error) {
        fail(ErrorCode::invalid_pattern_result,
             "The pattern's result " +
                 (error.path().empty() ? std::string("(root)")
                                       : quote(error.path(), message_quote_limit)) +
                 " " + error.reason() + ".");
    }
    Cell result_cell;
    result_cell.value = value;
    result_cell.schema = std::move(result_schema);
    result_cell.origin = Origin::pattern_result;
    run.result = state_->insert(std::move(result_cell), {}, run.hold.entry_->id);
    run.value = std::move(value);
    return run;
}

HandlerRun CellSpace::run_handler(const CellLink& link, json input, CellWriteGuard guard,
                                  const HandlerContext& context) {
    std::shared_ptr<const CellHandler> found;
    SharedSchema input_schema;
    {
        const std::lock_guard lock(state_->mutex);
        const Cell& cell = state_->cell(link);
        found = cell.handler;
        input_schema = cell.input_schema;
    }
    if (!found) {
        fail(ErrorCode::not_a_handler_cell, show({link.cell_id, {}}) + " is not a handler cell.");
    }
    const auto properties = found->input_schema.find("properties");
    const bool declares_result = properties != found->input_schema.end() &&
                                 properties->is_object() && properties->contains("result");
    if (input.is_object() && input.contains("result") && !declares_result) {
        json rest = input;
        rest.erase("result");
        input_schema->validate_arguments(rest);
    } else {
        input_schema->validate_arguments(input);
    }
    HandlerRun run;
    run.hold = CellHold(new_hold(state_));
    if (const auto given = input.find("result"); given != input.end()) {
        // A result link of the model's choosing may only point into the handler's own cells
        // or a result cell an earlier run made: naming any other cell as the result would
        // overwrite it.
        run.result = parse_link(*given);
        bool result_cell = false;
        {
            const std::lock_guard lock(state_->mutex);
            const auto cell = state_->cells.find(run.result.cell_id);
            result_cell =
                cell != state_->cells.end() && cell->second.origin == Origin::handler_result;
            if (result_cell) state_->holds[run.hold.entry_->id].insert(run.result.cell_id);
        }
        if (!result_cell &&
            std::none_of(found->writes.begin(), found->writes.end(),
                         [&](const CellLink& bound) { return inside_link(bound, run.result); })) {
            fail(ErrorCode::handler_write_denied,
                 "The result link must be a result location of an earlier call or point into a "
                 "cell this handler may write; leave \"result\" out to get a fresh result "
                 "cell.");
        }
    } else {
        state_->refuse_pattern_writes();
        Cell result_cell;
        result_cell.value = nullptr;
        result_cell.origin = Origin::handler_result;
        run.result = state_->insert(std::move(result_cell), {}, run.hold.entry_->id);
        input["result"] = run.result.to_json();
    }
    std::vector<CellLink> writable = found->writes;
    writable.push_back(run.result);
    CellWriter writer(*this, std::move(writable), std::move(guard));
    found->run(input, writer, context);
    try {
        run.value = get(run.result);
    } catch (const DialogError& error) {
        if (error.error_code() != ErrorCode::invalid_link) throw;
    }
    return run;
}

void CellSpace::release(const CellLink& link) {
    state_->refuse_pattern_writes();
    std::vector<Cell> released;  // destroyed after the lock is let go
    const std::lock_guard lock(state_->mutex);
    state_->release_locked(link, released);
}

std::size_t CellSpace::collect() {
    std::vector<Cell> released;  // destroyed after the lock is let go
    const std::lock_guard lock(state_->mutex);
    return state_->collect_locked(released);
}

std::size_t CellSpace::cell_count() const {
    const std::lock_guard lock(state_->mutex);
    return state_->cells.size();
}

const CellSpaceOptions& CellSpace::options() const noexcept {
    return state_->options;
}

CellHold CellSpace::hold(const std::vector<CellLink>& links) {
    CellHold made(new_hold(state_));
    const std::lock_guard lock(state_->mutex);
    auto& ids = state_->holds[made.entry_->id];
    for (const auto& link : links) {
        if (state_->cells.count(link.cell_id) != 0) ids.insert(link.cell_id);
    }
    return made;
}

bool CellHold::keep(const CellLink& link) {
    if (!entry_) return false;
    const auto state = entry_->state.lock();
    if (!state) return false;
    const std::lock_guard lock(state->mutex);
    if (state->cells.count(link.cell_id) == 0) return false;
    state->holds[entry_->id].insert(link.cell_id);
    return true;
}

void CellHold::keep_mentioned(const json& value) {
    if (!entry_) return;
    const auto state = entry_->state.lock();
    if (!state) return;
    const std::lock_guard lock(state->mutex);
    auto& ids = state->holds[entry_->id];
    detail::for_each_mention(value, [&](std::string_view id) {
        const auto found = state->cells.find(std::string(id));
        if (found != state->cells.end()) ids.insert(found->first);
    });
}

void CellHold::assign(const std::vector<CellLink>& links) {
    if (!entry_) return;
    const auto state = entry_->state.lock();
    if (!state) return;
    std::unordered_set<std::string> ids;
    const std::lock_guard lock(state->mutex);
    for (const auto& link : links) {
        if (state->cells.count(link.cell_id) != 0) ids.insert(link.cell_id);
    }
    state->holds[entry_->id].swap(ids);
}

void CellHold::clear() {
    assign({});
}

std::size_t CellHold::size() const {
    if (!entry_) return 0;
    const auto state = entry_->state.lock();
    if (!state) return 0;
    const std::lock_guard lock(state->mutex);
    const auto found = state->holds.find(entry_->id);
    return found == state->holds.end() ? 0 : found->second.size();
}

bool CellHold::holds(const CellLink& link) const {
    if (!entry_) return false;
    const auto state = entry_->state.lock();
    if (!state) return false;
    const std::lock_guard lock(state->mutex);
    const auto found = state->holds.find(entry_->id);
    return found != state->holds.end() && found->second.count(link.cell_id) != 0;
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
