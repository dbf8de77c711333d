#include "kill/config_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr off_t kMaxConfigBytes = 1 << 20;

}  // namespace

std::optional<std::string> read_config_text(const std::string& path, std::string_view what, std::string& error) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    error = fmt::format("{} {}: cannot open it: {}", what, path, std::strerror(errno));
    return std::nullopt;
  }
  std::string text;
  error.clear();
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    error = fmt::format("{} {} is not a regular file", what, path);
  } else if (info.st_size > kMaxConfigBytes) {
    error = fmt::format("{} {} is larger than {} bytes", what, path, kMaxConfigBytes);
  } else {
    char buffer[8192];
    ssize_t n = 0;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0 && text.size() <= static_cast<std::size_t>(kMaxConfigBytes)) {
      text.append(buffer, static_cast<std::size_t>(n));
    }
    if (n < 0) error = fmt::format("{} {}: cannot read it: {}", what, path, std::strerror(errno));
  }
  close(fd);
  if (!error.empty()) return std::nullopt;
  return text;
}

std::string toml_where(const std::string& source, const toml::node& node) {
  const auto& begin = node.source().begin;
  if (begin.line == 0) return source;
  return fmt::format("{}:{}:{}", source, begin.line, begin.column);
}

bool toml_only_known(const std::string& source, const toml::table& table, std::initializer_list<std::string_view> known,
                     const std::string& prefix, std::string& error) {
  for (const auto& [key, node] : table) {
    if (std::find(known.begin(), known.end(), std::string_view(key.str())) != known.end()) continue;
    std::string names;
    for (auto k : known) names += fmt::format("{}{}{}", names.empty() ? "" : ", ", prefix, k);
    // Where the key is written ([section] or `key =`), not where its value starts.
    const auto& at = key.source().begin;
    const std::string place = at.line != 0 ? fmt::format("{}:{}:{}", source, at.line, at.column) : toml_where(source, node);
    error = fmt::format("{}: unknown {} '{}{}' (known: {}); a misspelt name would silently be ignored", place,
                        node.is_table() ? "section" : "key", prefix,
                        sanitize_for_terminal(key.str()), names);
    return false;
  }
  return true;
}

std::optional<toml::table> parse_toml(std::string_view text, const std::string& source, std::string& error) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    // toml++ quotes the offending input in its description ("saw 't\n'") raw: the one terminal
    // sanitiser keeps the error one line that cannot drive a terminal.
    const auto& where = e.source().begin;
    error = fmt::format("{}:{}:{}: {}", source, where.line, where.column, sanitize_for_terminal(e.description()));
    return std::nullopt;
  }
}

}  // namespace gpureap
