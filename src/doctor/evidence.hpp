// A finding's machine-readable evidence as typed values: named facts, each a flag, a whole or
// real number, text, unknown, a list, or a record of named facts of its own. docs/doctor-json.md
// names each finding's facts; only the renderers turn evidence into JSON.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gpureap {

struct EvidenceValue;
using EvidenceList = std::vector<EvidenceValue>;

// Named facts, in the order they were first set.
class Evidence {
 public:
  using Field = std::pair<std::string, EvidenceValue>;
  Evidence() = default;
  Evidence(std::initializer_list<Field> fields);
  // The fact named `name`, added (unknown) when it is new.
  EvidenceValue& operator[](std::string_view name);
  const std::vector<Field>& fields() const { return fields_; }

 private:
  std::vector<Field> fields_;
};

struct EvidenceValue {
  // Unknown (JSON null), a flag, a count or an identifier that may be negative, one that may not,
  // a real number, text, a list, a record.
  using Value = std::variant<std::nullptr_t, bool, std::int64_t, std::uint64_t, double, std::string, EvidenceList,
                             Evidence>;
  Value value = nullptr;

  EvidenceValue() = default;
  EvidenceValue(std::nullptr_t) {}
  EvidenceValue(bool flag) : value(flag) {}
  template <std::signed_integral T>
  EvidenceValue(T number) : value(static_cast<std::int64_t>(number)) {}
  template <std::unsigned_integral T>
    requires(!std::same_as<T, bool>)
  EvidenceValue(T number) : value(static_cast<std::uint64_t>(number)) {}
  EvidenceValue(double number) : value(number) {}
  EvidenceValue(std::string text) : value(std::move(text)) {}
  EvidenceValue(const char* text) : value(std::string(text)) {}
  EvidenceValue(std::string_view text) : value(std::string(text)) {}
  EvidenceValue(EvidenceList list) : value(std::move(list)) {}
  EvidenceValue(Evidence record) : value(std::move(record)) {}
  // Unknown when absent.
  template <typename T>
  EvidenceValue(const std::optional<T>& known) {
    if (known) *this = EvidenceValue(*known);
  }
  template <typename T>
  EvidenceValue(const std::vector<T>& items) : value(EvidenceList(items.begin(), items.end())) {}
  template <typename T>
  EvidenceValue(const std::set<T>& items) : value(EvidenceList(items.begin(), items.end())) {}
};

inline Evidence::Evidence(std::initializer_list<Field> fields) {
  for (const auto& [name, value] : fields) (*this)[name] = value;
}

inline EvidenceValue& Evidence::operator[](std::string_view name) {
  for (auto& field : fields_) {
    if (field.first == name) return field.second;
  }
  return fields_.emplace_back(std::string(name), EvidenceValue()).second;
}

}  // namespace gpureap
