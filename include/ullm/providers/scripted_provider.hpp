#pragma once

/// Kept for code written before 0.2: the scripted provider lives in
/// `<ullm/testing/scripted_provider.hpp>`.

#include <ullm/testing/scripted_provider.hpp>
