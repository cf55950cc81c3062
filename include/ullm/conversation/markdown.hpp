#pragma once

/// Markdown export of a conversation transcript.

#include <ullm/conversation/snapshot.hpp>
#include <ullm/core/message.hpp>

#include <string>
#include <vector>

namespace ullm {

/// What the metadata table at the top of a Markdown transcript shows.
struct MarkdownHeader {
    std::string session_id;
    std::string tenant;
    std::string provider;
    std::string model;
    ConversationTotals totals;
};

/// The transcript as Markdown: a title and a metadata table (session, tenant, provider, model,
/// message count, tokens, cost), then one `##` section per message in order. Tool calls show
/// their name, id and arguments as a JSON block; tool results their name, id, whether they
/// failed and the result; visible reasoning is a quote. Provider replay state is never
/// written. Code blocks are fenced with more backticks than the content holds, and table cells
/// are escaped, so message content cannot break the layout. Thread-safe.
[[nodiscard]] std::string render_markdown(const std::vector<Message>& messages,
                                          const MarkdownHeader& header);

}  // namespace ullm
