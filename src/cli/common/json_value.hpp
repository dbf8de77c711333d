// A known value, or JSON null when it is not known (never 0: docs/*-json.md).
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

namespace gpureap {

template <typename T>
nlohmann::ordered_json optional_value(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

}  // namespace gpureap
