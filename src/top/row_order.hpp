// Which rows `top` shows and in what order: the `/` filter (a plain substring, never a
// pattern: the text a person types is not compiled), the GPU chosen with `g`, the sort key,
// and the tree (workers under the process they belong to, an orphan under its dead owner).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "top/top_row.hpp"

namespace gpureap {

enum class SortKey { Memory, Cpu, Age, Pid };
std::string_view sort_key_name(SortKey key);  // "memory", "cpu", "age", "pid"
std::optional<SortKey> parse_sort_key(std::string_view name);
SortKey next_sort_key(SortKey key);

struct RowOrder {
  SortKey sort = SortKey::Memory;
  bool tree = false;
  std::string filter;           // case-insensitive substring of PID, user, container, role, command
  std::optional<unsigned> gpu;  // only this GPU's rows
};

struct DisplayRow {
  TopRow row;
  std::string tree_prefix;  // "├─ ", "│  └─ ", ... before the command in the tree
  bool placeholder = false; // a dead owner shown only to hold its orphans in the tree
};

// Flat: every matching row, sorted (largest memory, CPU, age first; PID ascending), ties by
// GPU then PID. Tree: per GPU, the roots sorted so, each followed by its descendants (by PID);
// a node is shown when it or one of its descendants matches the filter.
std::vector<DisplayRow> order_rows(const std::vector<TopRow>& rows, const RowOrder& order);

// The filter's test, exposed for the tests: ASCII case folded, no pattern syntax.
bool row_matches(const TopRow& row, std::string_view filter);

}  // namespace gpureap
