#include "top/row_order.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace gpureap {
namespace {

char fold(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool contains_folded(std::string_view text, std::string_view needle) {
  if (needle.empty()) return true;
  return std::search(text.begin(), text.end(), needle.begin(), needle.end(),
                     [](char a, char b) { return fold(a) == fold(b); }) != text.end();
}

// Larger first for the measures; -1 for what is unknown so it sorts last.
double measure(const TopRow& row, SortKey key) {
  switch (key) {
    case SortKey::Memory: return row.gpu_memory ? static_cast<double>(*row.gpu_memory) : -1;
    case SortKey::Cpu: return row.cpu_percent.value_or(-1);
    case SortKey::Age: return row.age_seconds.value_or(-1);
    case SortKey::Pid: return -static_cast<double>(row.pid());
  }
  return 0;
}

bool before(const TopRow& a, const TopRow& b, SortKey key) {
  const double ma = measure(a, key), mb = measure(b, key);
  if (ma != mb) return ma > mb;
  const unsigned ga = a.gpu.value_or(~0u), gb = b.gpu.value_or(~0u);
  if (ga != gb) return ga < gb;
  return a.pid() < b.pid();
}

TopRow placeholder_for(pid_t pid, std::optional<unsigned> gpu) {
  TopRow row;
  row.kind = RowKind::Gone;
  row.gpu = gpu;
  row.key.pid = pid;
  row.role = "gone";
  row.command = "(exited)";
  row.can_act = false;
  row.cannot_act = "gone: select the processes under it";
  return row;
}

class TreeBuilder {
 public:
  TreeBuilder(const std::vector<TopRow>& rows, const RowOrder& order) : order_(order) {
    for (const auto& row : rows) {
      if (order.gpu && row.gpu != order.gpu) continue;
      nodes_.push_back({row, "", false});
    }
    // An orphan whose dead owner has no row of its own on that GPU gets one to hang from.
    std::set<std::pair<unsigned, pid_t>> present;
    for (const auto& n : nodes_) present.insert({n.row.gpu.value_or(~0u), n.row.pid()});
    const std::size_t real = nodes_.size();
    for (std::size_t i = 0; i < real; ++i) {
      const TopRow& row = nodes_[i].row;
      if (row.kind != RowKind::Orphan || !row.parent) continue;
      if (present.insert({row.gpu.value_or(~0u), *row.parent}).second) {
        nodes_.push_back({placeholder_for(*row.parent, row.gpu), "", true});
      }
    }
    for (std::size_t i = 0; i < nodes_.size(); ++i) index_[{nodes_[i].row.gpu.value_or(~0u), nodes_[i].row.pid()}] = i;
    children_.resize(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const TopRow& row = nodes_[i].row;
      const auto parent = row.parent ? index_.find({row.gpu.value_or(~0u), *row.parent}) : index_.end();
      if (parent != index_.end() && parent->second != i) {
        children_[parent->second].push_back(i);
      } else {
        roots_.push_back(i);
      }
    }
  }

  std::vector<DisplayRow> build() {
    std::stable_sort(roots_.begin(), roots_.end(), [&](std::size_t a, std::size_t b) {
      const unsigned ga = nodes_[a].row.gpu.value_or(~0u), gb = nodes_[b].row.gpu.value_or(~0u);
      if (ga != gb) return ga < gb;
      return before(nodes_[a].row, nodes_[b].row, order_.sort);
    });
    for (auto& c : children_) {
      std::sort(c.begin(), c.end(), [&](std::size_t a, std::size_t b) { return nodes_[a].row.pid() < nodes_[b].row.pid(); });
    }
    std::vector<DisplayRow> out;
    for (std::size_t root : roots_) {
      if (visible(root)) emit(root, "", "", out);
    }
    // Rows whose parents point at each other (a reused PID) reach no root: shown at the top.
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!emitted_.count(i) && visible(i)) emit(i, "", "", out);
    }
    return out;
  }

 private:
  // Shown when it matches or a descendant does (the path to a match keeps its shape).
  bool visible(std::size_t i) {
    if (auto it = visible_.find(i); it != visible_.end()) return it->second;
    visible_[i] = false;  // a cycle (a reused PID) cannot recurse for ever
    bool shown = row_matches(nodes_[i].row, order_.filter);
    for (std::size_t c : children_[i]) shown = visible(c) || shown;
    return visible_[i] = shown;
  }

  void emit(std::size_t i, const std::string& prefix, const std::string& child_prefix, std::vector<DisplayRow>& out) {
    if (emitted_.count(i)) return;
    emitted_.insert(i);
    DisplayRow row = nodes_[i];
    row.tree_prefix = prefix;
    out.push_back(std::move(row));
    std::vector<std::size_t> shown;
    for (std::size_t c : children_[i]) {
      if (visible(c)) shown.push_back(c);
    }
    for (std::size_t k = 0; k < shown.size(); ++k) {
      const bool last = k + 1 == shown.size();
      emit(shown[k], child_prefix + (last ? "└─ " : "├─ "), child_prefix + (last ? "   " : "│  "), out);
    }
  }

  const RowOrder& order_;
  std::vector<DisplayRow> nodes_;
  std::map<std::pair<unsigned, pid_t>, std::size_t> index_;
  std::vector<std::vector<std::size_t>> children_;
  std::vector<std::size_t> roots_;
  std::map<std::size_t, bool> visible_;
  std::set<std::size_t> emitted_;
};

}  // namespace

std::string_view sort_key_name(SortKey key) {
  switch (key) {
    case SortKey::Memory: return "memory";
    case SortKey::Cpu: return "cpu";
    case SortKey::Age: return "age";
    case SortKey::Pid: return "pid";
  }
  return "memory";
}

std::optional<SortKey> parse_sort_key(std::string_view name) {
  for (SortKey key : {SortKey::Memory, SortKey::Cpu, SortKey::Age, SortKey::Pid}) {
    if (sort_key_name(key) == name) return key;
  }
  return std::nullopt;
}

SortKey next_sort_key(SortKey key) {
  switch (key) {
    case SortKey::Memory: return SortKey::Cpu;
    case SortKey::Cpu: return SortKey::Age;
    case SortKey::Age: return SortKey::Pid;
    case SortKey::Pid: return SortKey::Memory;
  }
  return SortKey::Memory;
}

bool row_matches(const TopRow& row, std::string_view filter) {
  if (filter.empty()) return true;
  return contains_folded(std::to_string(row.pid()), filter) || contains_folded(row.user, filter) ||
         contains_folded(row.container, filter) || contains_folded(row.role, filter) ||
         contains_folded(row.command, filter);
}

std::vector<DisplayRow> order_rows(const std::vector<TopRow>& rows, const RowOrder& order) {
  if (order.tree) return TreeBuilder(rows, order).build();
  std::vector<const TopRow*> kept;
  for (const auto& row : rows) {
    if (order.gpu && row.gpu != order.gpu) continue;
    if (row_matches(row, order.filter)) kept.push_back(&row);
  }
  std::stable_sort(kept.begin(), kept.end(), [&](const TopRow* a, const TopRow* b) { return before(*a, *b, order.sort); });
  std::vector<DisplayRow> out;
  out.reserve(kept.size());
  for (const TopRow* row : kept) out.push_back({*row, "", false});
  return out;
}

}  // namespace gpureap
