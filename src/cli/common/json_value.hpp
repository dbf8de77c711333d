// JSON values and documents as the commands print them.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace gpureap {

// A known value, or JSON null when it is not known (never 0: docs/*-json.md).
template <typename T>
nlohmann::ordered_json optional_value(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

// A whole document: two-space indents, invalid UTF-8 (a process's own text) replaced, one
// final newline.
inline std::string json_document(const nlohmann::ordered_json& json) {
  return json.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace gpureap
