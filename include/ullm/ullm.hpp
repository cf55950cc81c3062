#pragma once

/// Everything ullm offers, in one include: the client, conversations, tools, providers, session
/// stores, dialogs and MCP servers' tools. The replay helpers for tests (`testing/replay.hpp`) are
/// not included. Include single headers instead to build faster.

#include <ullm/client/budget.hpp>
#include <ullm/client/client.hpp>
#include <ullm/conversation/context_manager.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/conversation/markdown.hpp>
#include <ullm/conversation/snapshot.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/message.hpp>
#include <ullm/core/usage.hpp>
#include <ullm/dialog/cell_space.hpp>
#include <ullm/dialog/dialog.hpp>
#include <ullm/dialog/dialog_tool.hpp>
#include <ullm/dialog/generate_object.hpp>
#include <ullm/dialog/tool_adapter.hpp>
#include <ullm/http/curl_transport.hpp>
#include <ullm/mcp/mcp_client.hpp>
#include <ullm/mcp/mcp_tools.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/embedding.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>
#include <ullm/store/file_session_store.hpp>
#include <ullm/store/memory_session_store.hpp>
#include <ullm/store/session_store.hpp>
#include <ullm/store/sqlite_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>
#include <ullm/tools/tool.hpp>
#include <ullm/tools/tool_registry.hpp>
#include <ullm/version.hpp>
